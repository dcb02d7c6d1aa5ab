// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Groups of transports with shared windows for tests, ranks as threads: on
// the loopback hub or over shared memory, and a fixture parameterized by
// which (instantiated with ::testing::Values("loopback", "shm") and
// TransportName).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "store/memory_store.h"
#include "support/shm_test_util.h"
#include "transport/loopback/loopback_transport.h"

namespace hora::testing {

// The n transports of one group (one per rank) on the loopback hub.
inline std::vector<std::unique_ptr<Transport>> LoopbackGroup(int n) {
  auto hub = LoopbackHub::Create(n);
  std::vector<std::unique_ptr<Transport>> out;
  for (int r = 0; r < n; ++r) out.push_back(hub->Connect(r));
  return out;
}

// The same over shared memory, ranks as threads.
inline std::vector<std::unique_ptr<Transport>> ShmGroup(int n, Duration spin) {
  MemoryStore store;
  const std::string job = shm_test::UniqueJobId("window");
  std::vector<std::unique_ptr<Transport>> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto t = CreateShmTransport(r, n, store, job, std::chrono::seconds(60), spin);
      if (t.ok())
        out[static_cast<size_t>(r)] = std::move(*t);
      else
        ADD_FAILURE() << t.status().ToString();
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

// Runs fn(rank, transport) on one thread per rank; returns each rank's status.
inline std::vector<Status> OnRanks(std::vector<std::unique_ptr<Transport>>& ts,
                                   const std::function<Status(int, Transport&)>& fn) {
  std::vector<Status> st(ts.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ts.size(); ++r) {
    threads.emplace_back([&, r] { st[r] = fn(static_cast<int>(r), *ts[r]); });
  }
  for (auto& t : threads) t.join();
  return st;
}

// Parameterized by "loopback" or "shm": the two transports that offer
// shared windows (transport/shared_window.h).
class WindowGroupTest : public ::testing::TestWithParam<const char*> {
 protected:
  bool shm() const { return std::string(GetParam()) == "shm"; }
  // `spin`: how long the shm transport's waiters poll before they sleep.
  std::vector<std::unique_ptr<Transport>> Group(int n, Duration spin = kShmSpin) {
    return shm() ? ShmGroup(n, spin) : LoopbackGroup(n);
  }
};

// The test name suffix of a WindowGroupTest's parameter.
inline std::string TransportName(const ::testing::TestParamInfo<const char*>& info) {
  return std::string(info.param);
}

}  // namespace hora::testing
