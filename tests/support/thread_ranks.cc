// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "support/thread_ranks.h"

#include <gtest/gtest.h>

#include <thread>

#include "api/thread_world_impl.h"
#include "transport/loopback/loopback_transport.h"

namespace hora::testing {

ThreadRanks::ThreadRanks(int n, const Settings& settings)
    : ThreadRanks(n, [&settings](int) { return settings; }) {}

ThreadRanks::ThreadRanks(int n, const std::function<Settings(int rank)>& settings_of) {
  world_ = ThreadWorld::Create(n);
  for (int r = 0; r < n; ++r) {
    SessionOptions opts;
    opts.rank = r;
    opts.world = world_;
    opts.settings = settings_of(r);
    opts.read_environment = false;
    auto s = Session::Create(opts);
    if (!s.ok()) {
      ADD_FAILURE() << "Session::Create failed for rank " << r << ": " << s.status().ToString();
      sessions_.clear();
      return;
    }
    sessions_.push_back(std::move(s).value());
  }
}

void ThreadRanks::Lose(int rank) { world_->impl().hub->Lose(rank); }

std::vector<Status> ThreadRanks::Run(const std::function<Status(int, Session&)>& fn,
                                     const std::function<bool(int)>& participate) {
  std::vector<Status> results(sessions_.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < size(); ++r) {
    if (participate && !participate(r)) continue;
    threads.emplace_back([&, r] { results[static_cast<size_t>(r)] = fn(r, session(r)); });
  }
  for (auto& t : threads) t.join();
  return results;
}

Settings TestSettings(Settings extra) {
  Settings s = {{"HORA_TIMEOUT_S", "60"}};
  for (auto& [k, v] : extra) s[k] = v;
  return s;
}

void ExpectAllOk(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r)
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
}

}  // namespace hora::testing
