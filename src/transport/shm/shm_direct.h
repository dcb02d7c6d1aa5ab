// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Reading another process's memory (Linux cross-memory attach,
// process_vm_readv): the shm transport's single copy of a large message,
// straight from the sender's buffer into the receiver's. The kernel allows
// it where the reader may ptrace the owner (same user, and Yama's
// ptrace_scope 0, or CAP_SYS_PTRACE) and no seccomp filter forbids the call:
// the rendezvous probes each pair first (CanReadProcess) and the pairs that
// cannot use the slots only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hora/status.h"

namespace hora {

// Copies `bytes` bytes at address `remote` of process `pid` into `local`.
// Fails with the system's reason (the process gone, the range unmapped,
// permission) and how far it got.
Status ReadFromProcess(int pid, uint64_t remote, void* local, size_t bytes);

// Whether this process can read process `pid`'s memory: reads the
// uint64_t at `address` there and compares it with `expected`.
bool CanReadProcess(int pid, uint64_t address, uint64_t expected);

}  // namespace hora
