// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// How many cores this process may run on.
#pragma once

namespace hora {

// The CPUs in this process's affinity mask (taskset, cgroup cpusets), or the
// machine's count where the mask cannot be read; at least 1.
int AvailableCores();

}  // namespace hora
