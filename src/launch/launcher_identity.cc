// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "launch/launcher_identity.h"

#include <unistd.h>

#include <cstdlib>

#include "common/process_alive.h"

namespace hora {

std::string LauncherIdentity() {
  return std::to_string(getpid()) + ":" + std::to_string(PidNamespaceId()) + ":" + BootId();
}

std::optional<int> LocalLauncherPid(const std::string& identity) {
  const size_t a = identity.find(':');
  const size_t b = a == std::string::npos ? a : identity.find(':', a + 1);
  if (b == std::string::npos) return std::nullopt;
  const std::string pid = identity.substr(0, a);
  if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  const std::string boot = BootId();
  if (identity.substr(a + 1, b - a - 1) != std::to_string(PidNamespaceId()) || boot.empty() ||
      identity.substr(b + 1) != boot) {
    return std::nullopt;
  }
  const int n = std::atoi(pid.c_str());
  return n > 1 ? std::optional<int>(n) : std::nullopt;
}

}  // namespace hora
