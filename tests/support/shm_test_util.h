// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Helpers of the shm transport tests: unique job ids, ranks as threads over
// one MemoryStore, and where a pointer lies in this process's mappings.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "store/memory_store.h"
#include "transport/shm/shm_direct.h"
#include "transport/shm/shm_transport.h"

namespace hora::shm_test {

inline TimePoint Soon() { return Clock::now() + std::chrono::seconds(60); }

// Unique per process and call: ctest runs test processes in parallel.
inline std::string UniqueJobId(const std::string& what) {
  static std::atomic<int> counter{0};
  return "test-" + what + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

// Whether this process may read its own memory through the kernel (a
// seccomp filter can forbid process_vm_readv): where not, the shm
// transport's single copy never happens, and its tests skip.
inline bool KernelAllowsReads() {
  const uint64_t token = 0x5eed5eed5eed5eedULL;
  return CanReadProcess(getpid(), reinterpret_cast<uintptr_t>(&token), token);
}

// Skips a test of single copy where this process may not read its own
// memory through the kernel (KernelAllowsReads); inside namespace hora.
#define SKIP_WHERE_THE_KERNEL_FORBIDS_READS() \
  if (!shm_test::KernelAllowsReads()) GTEST_SKIP() << "process_vm_readv is not allowed here"

// Options with a rendezvous timeout of a minute; `single_copy_bytes` as given
// (0: every message through the slots).
inline ShmOptions Options(size_t single_copy_bytes = 0) {
  ShmOptions o;
  o.timeout = std::chrono::seconds(60);
  o.single_copy_bytes = single_copy_bytes;
  return o;
}

// Runs fn(transport) on n threads, rank r on thread r, each with its own shm
// transport of one group (the segments are mapped once per rank), made with
// `options(r)`; then, on the same thread once the transport is gone,
// after(r) where given.
inline void RunRanks(
    int n, const std::string& job_id, const std::function<void(Transport&)>& fn,
    const std::function<ShmOptions(int)>& options = [](int) { return Options(); },
    const std::function<void(int)>& after = nullptr) {
  MemoryStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      {
        auto t = CreateShmTransport(r, n, store, job_id, options(r));
        if (t.ok()) {
          fn(**t);
        } else {
          ADD_FAILURE() << t.status().ToString();
        }
      }
      if (after) after(r);
    });
  }
  for (auto& t : threads) t.join();
}

// The path of the mapping of this process that contains `p` ("" if none),
// e.g. "/dev/shm/hora-job-0-1 (deleted)".
inline std::string MappingOf(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2 || addr < lo || addr >= hi) continue;
    size_t slash = line.find('/');
    return slash == std::string::npos ? "" : line.substr(slash);
  }
  return "";
}

}  // namespace hora::shm_test
