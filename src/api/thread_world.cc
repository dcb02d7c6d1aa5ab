// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "api/thread_world_impl.h"

namespace hora {

ThreadWorld::ThreadWorld(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ThreadWorld::~ThreadWorld() = default;

std::shared_ptr<ThreadWorld> ThreadWorld::Create(int size) {
  auto impl = std::make_unique<Impl>();
  impl->asked = size;
  impl->store = std::make_shared<MemoryStore>();
  impl->hub = LoopbackHub::Create(size < 1 ? 1 : size);
  return std::shared_ptr<ThreadWorld>(new ThreadWorld(std::move(impl)));
}

int ThreadWorld::size() const { return impl_->hub->size(); }

}  // namespace hora
