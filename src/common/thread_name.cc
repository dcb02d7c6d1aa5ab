// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/thread_name.h"

#include <pthread.h>

#include <cstring>
#include <string>

namespace hora {

void NameThisThread(const char* name) {
  const std::string cut(name, strnlen(name, 15));
  pthread_setname_np(pthread_self(), cut.c_str());  // best effort: a name is only a label
}

}  // namespace hora
