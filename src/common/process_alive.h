// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Whether a process of this host still runs: it exists and has not ended
// (a zombie, ended but not yet reaped by its parent, counts as ended: an
// orphan's zombie may wait for a lazy init process). A process of another
// pid namespace is not seen.
#pragma once

#include <cstdint>
#include <string>

namespace hora {

bool ProcessRuns(int pid);

// This process's pid namespace: the inode of /proc/self/ns/pid (0 where
// unknown). Two processes see each other's pids only within one.
uint64_t PidNamespaceId();

// This boot of this host (/proc/sys/kernel/random/boot_id; "" where
// unknown): processes with the same one and the same pid namespace are on
// one host and see each other's pids.
std::string BootId();

}  // namespace hora
