// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// HORA_BIND_TO=core (horarun --bind-to core): each rank of a host on a CPU of
// its own. Binding changes the whole process, so every case runs in a forked
// child that reports through its exit code.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <vector>

#include "common/cores.h"
#include "hora/session.h"

namespace hora {
namespace {

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// Runs `body` in a forked child; its return value is the exit code.
int InChild(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

TEST(BindToCore, EachLocalRankGetsItsOwnCpuOfTheMask) {
  const std::vector<int> cpus = AllowedCpus();
  ASSERT_FALSE(cpus.empty());
  for (int local_rank = 0; local_rank < static_cast<int>(cpus.size()); ++local_rank) {
    const int rc = InChild([&] {
      std::string note;
      if (!BindToCore(local_rank, static_cast<int>(cpus.size()), &note).ok()) return 1;
      // A thread started after the binding inherits it.
      std::vector<int> seen;
      std::thread t([&] { seen = AllowedCpus(); });
      t.join();
      const std::vector<int> want = {cpus[static_cast<size_t>(local_rank)]};
      if (AllowedCpus() != want || seen != want) return 2;
      return note.find("bound to CPU " + std::to_string(want[0])) == std::string::npos ? 3 : 0;
    });
    EXPECT_EQ(rc, 0) << "local rank " << local_rank;
  }
}

TEST(BindToCore, MoreRanksThanCpusBindsNothingAndSaysSo) {
  const std::vector<int> cpus = AllowedCpus();
  if (static_cast<long>(cpus.size()) < sysconf(_SC_NPROCESSORS_ONLN)) {
    GTEST_SKIP() << "this test process is bound to " << cpus.size()
                 << " CPU(s) already: AMaskNarrowerThanTheHostIsLeftAsItIs's case";
  }
  const int rc = InChild([&] {
    std::string note;
    const int ranks = static_cast<int>(cpus.size()) + 1;
    Result<bool> bound = BindToCore(0, ranks, &note);
    if (!bound.ok() || *bound) return 1;
    if (AllowedCpus() != cpus) return 2;
    return note.find(std::to_string(ranks) + " ranks on this host and") == std::string::npos ? 3
                                                                                             : 0;
  });
  EXPECT_EQ(rc, 0);
}

TEST(BindToCore, AMaskNarrowerThanTheHostIsLeftAsItIs) {
  // A launcher bound the rank to one CPU (mpirun does by default), or an
  // earlier init did: more ranks than that mask's CPUs is no failure.
  const std::vector<int> cpus = AllowedCpus();
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || cpus.empty()) GTEST_SKIP() << "one CPU";
  const int rc = InChild([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus.back(), &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) return 4;
    std::string note;
    Result<bool> bound = BindToCore(1, 2, &note);
    if (!bound.ok() || !*bound) return 1;
    if (AllowedCpus() != std::vector<int>{cpus.back()}) return 2;
    return note.find("left as it is") == std::string::npos ? 3 : 0;
  });
  EXPECT_EQ(rc, 0);
}

TEST(BindToCore, ASessionStartedWithTheSettingIsBound) {
  const std::vector<int> cpus = AllowedCpus();
  const int rc = InChild([&] {
    SessionOptions o;
    o.read_environment = false;
    o.settings = {{"HORA_BIND_TO", "core"}, {"HORA_RANK", "0"},       {"HORA_SIZE", "1"},
                  {"HORA_LOCAL_RANK", "0"}, {"HORA_LOCAL_SIZE", "1"}, {"HORA_CROSS_RANK", "0"},
                  {"HORA_CROSS_SIZE", "1"}};
    auto s = Session::Create(o);
    if (!s.ok()) return 1;
    return AllowedCpus() == std::vector<int>{cpus[0]} ? 0 : 2;
  });
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace hora
