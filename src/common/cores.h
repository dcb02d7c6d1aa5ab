// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// How many cores this process may run on, and binding a rank to one of
// them (HORA_BIND_TO=core).
#pragma once

#include <string>

#include "hora/status.h"

namespace hora {

// The CPUs in this process's affinity mask (taskset, cgroup cpusets), or the
// machine's count where the mask cannot be read; at least 1.
int AvailableCores();

// Binds every thread of this process (and so the threads it starts later)
// to one CPU of its affinity mask: the `local_rank`-th, so that the
// `local_size` ranks of a host, started with one mask, get a CPU each (as
// mpirun's --bind-to core); true. Where the ranks outnumber the CPUs nothing
// is bound and *note says why: false, or true where the mask is narrower
// than the host already (a launcher bound the rank, or an earlier init).
// An error names the CPU and the system's reason.
Result<bool> BindToCore(int local_rank, int local_size, std::string* note);

}  // namespace hora
