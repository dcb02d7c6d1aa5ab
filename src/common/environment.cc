// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/environment.h"

#include <unistd.h>

#include <cstring>

namespace hora {

std::map<std::string, std::string> ReadWholeEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr)
      env.emplace(std::string(*e, static_cast<size_t>(eq - *e)), std::string(eq + 1));
  }
  return env;
}

}  // namespace hora
