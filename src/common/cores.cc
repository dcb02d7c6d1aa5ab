// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/cores.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace hora {

int AvailableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(CPU_COUNT(&set), 1);
  return std::max(static_cast<int>(std::thread::hardware_concurrency()), 1);
}

namespace {

// The CPUs this process's container may use (cgroup v2's effective cpuset,
// as docker --cpuset-cpus sets it), else the host's online ones.
long CpusOfThisContainer() {
  std::ifstream f("/sys/fs/cgroup/cpuset.cpus.effective");
  std::string list;
  if (f && std::getline(f, list) && !list.empty()) {
    long count = 0;
    std::stringstream parts(list);
    for (std::string part; std::getline(parts, part, ',');) {
      const size_t dash = part.find('-');
      const long first = std::atol(part.c_str());
      const long last = dash == std::string::npos ? first : std::atol(part.c_str() + dash + 1);
      if (last >= first) count += last - first + 1;
    }
    if (count > 0) return count;
  }
  return sysconf(_SC_NPROCESSORS_ONLN);
}

}  // namespace

Result<bool> BindToCore(int local_rank, int local_size, std::string* note) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    return UnavailableError(std::string("HORA_BIND_TO=core: cannot read the affinity mask: ") +
                            std::strerror(errno));
  }
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (local_size > static_cast<int>(cpus.size())) {
    // A mask narrower than the host's CPUs was set already (the launcher
    // bound the rank, as mpirun does by default, or an earlier init):
    // kept, and not a failure to bind.
    const long online = CpusOfThisContainer();
    if (online > 0 && static_cast<long>(cpus.size()) < online) {
      *note = "HORA_BIND_TO=core: left as it is: this process is bound to " +
              std::to_string(cpus.size()) + " of the " + std::to_string(online) +
              " CPUs it could use already";
      return true;
    }
    *note = "HORA_BIND_TO=core: not binding: " + std::to_string(local_size) +
            " ranks on this host and " + std::to_string(cpus.size()) +
            " CPU(s) in this process's affinity mask";
    return false;
  }
  const int cpu = cpus[static_cast<size_t>(local_rank) % cpus.size()];
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  // Every thread that exists now (a Python interpreter may have started
  // some); threads started later inherit the mask of their creator.
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) {
    return UnavailableError(std::string("HORA_BIND_TO=core: cannot list /proc/self/task: ") +
                            std::strerror(errno));
  }
  Status st;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
    if (sched_setaffinity(tid, sizeof one, &one) != 0 && errno != ESRCH && st.ok()) {
      st = UnavailableError("HORA_BIND_TO=core: cannot bind thread " + std::to_string(tid) +
                            " to CPU " + std::to_string(cpu) + ": " + std::strerror(errno));
    }
  }
  closedir(dir);
  if (!st.ok()) return st;
  *note = "bound to CPU " + std::to_string(cpu) + " (HORA_BIND_TO=core)";
  return true;
}

}  // namespace hora
