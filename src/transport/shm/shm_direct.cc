// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/shm/shm_direct.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace hora {

Status ReadFromProcess(int pid, uint64_t remote, void* local, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    iovec to{static_cast<std::byte*>(local) + done, bytes - done};
    iovec from{reinterpret_cast<void*>(static_cast<uintptr_t>(remote + done)), bytes - done};
    const ssize_t n = process_vm_readv(pid, &to, 1, &from, 1, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    const std::string why = n == 0 ? "nothing read" : std::strerror(errno);
    return UnavailableError("reading " + std::to_string(bytes) + " bytes from process " +
                            std::to_string(pid) + " (process_vm_readv) failed after " +
                            std::to_string(done) + ": " + why);
  }
  return Status::Ok();
}

bool CanReadProcess(int pid, uint64_t address, uint64_t expected) {
  if (pid <= 0) return false;
  uint64_t seen = ~expected;
  return ReadFromProcess(pid, address, &seen, sizeof(seen)).ok() && seen == expected;
}

}  // namespace hora
