// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#pragma once

#include <memory>

#include "hora/thread_world.h"
#include "store/memory_store.h"
#include "transport/loopback/loopback_transport.h"

namespace hora {

struct ThreadWorld::Impl {
  int asked = 0;  // the size Create was given (a world of 0 or fewer: refused by Session::Create)
  std::shared_ptr<MemoryStore> store;
  std::shared_ptr<LoopbackHub> hub;
};

}  // namespace hora
