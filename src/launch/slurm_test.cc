// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "launch/slurm.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace hora {
namespace {

std::vector<std::string> Expand(const std::string& list) {
  auto hosts = ExpandSlurmHostlist(list);
  EXPECT_TRUE(hosts.ok()) << list << ": " << hosts.status().ToString();
  return hosts.ok() ? *hosts : std::vector<std::string>{};
}

TEST(SlurmHostlist, ExpandsRangesListsAndPlainNames) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Expand("localhost"), V({"localhost"}));
  EXPECT_EQ(Expand("node[01-03,07],gpu5"), V({"node01", "node02", "node03", "node07", "gpu5"}));
  EXPECT_EQ(Expand("a,b,c"), V({"a", "b", "c"}));
  EXPECT_EQ(Expand("n[8-10]"), V({"n8", "n9", "n10"}));
  EXPECT_EQ(Expand("n[08-10]"), V({"n08", "n09", "n10"}));  // padding kept
  EXPECT_EQ(Expand("n[5]"), V({"n5"}));
  EXPECT_EQ(Expand("r[1-2]n[1-2]"), V({"r1n1", "r1n2", "r2n1", "r2n2"}));
  EXPECT_EQ(Expand("cn[1-2]-ib,login"), V({"cn1-ib", "cn2-ib", "login"}));
  EXPECT_EQ(Expand("host-1.example.org"), V({"host-1.example.org"}));
}

TEST(SlurmHostlist, FirstHostWithoutExpandingTheRest) {
  EXPECT_EQ(*FirstSlurmHost("node[01-03,07],gpu5"), "node01");
  EXPECT_EQ(*FirstSlurmHost("gpu5,node[1-4]"), "gpu5");
  EXPECT_EQ(*FirstSlurmHost("r[3-4]n[07-08]"), "r3n07");
  EXPECT_EQ(*FirstSlurmHost("a,n[1-999999]"), "a");
}

TEST(SlurmHostlist, MalformedListsNameTheProblem) {
  for (const auto& [list, says] : std::vector<std::pair<std::string, std::string>>{
           {"node[01-03", "unclosed '['"},
           {"node01-03]", "unbalanced brackets"},
           {"n[3-1]", "goes down"},
           {"n[a-b]", "is not a number or a range"},
           {"n[1,,2]", "is not a number or a range"},
           {"", "an empty entry"},
           {"a,,b", "an empty entry"},
           {"n[[1]]", "unbalanced brackets"},
       }) {
    auto hosts = ExpandSlurmHostlist(list);
    ASSERT_FALSE(hosts.ok()) << list;
    EXPECT_NE(hosts.status().message().find(says), std::string::npos)
        << list << ": " << hosts.status().message();
    EXPECT_NE(hosts.status().message().find("'" + list + "'"), std::string::npos);
  }
  auto big = ExpandSlurmHostlist("n[1-100]", 50);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("more than 50 hosts"), std::string::npos);
  EXPECT_FALSE(ExpandSlurmHostlist("r[1-1000]n[1-1000]", 1000).ok());
}

uint16_t Port(uint64_t job, uint64_t step) {
  return *SlurmStorePort(std::to_string(job), std::to_string(step));
}

TEST(SlurmStorePort, DeterministicInItsRangeBelowTheEphemeralPorts) {
  const uint16_t p = Port(123456, 0);
  EXPECT_EQ(p, Port(123456, 0));
  EXPECT_EQ(p, kSlurmStorePortBase + 7417ull * (123456 % 12000) % 12000);
  for (uint64_t job : {0ull, 1ull, 11999ull, 4294967295ull, 999999999999999999ull}) {
    for (uint64_t step : {0ull, 1ull, 4294967294ull, 4294967295ull}) {
      EXPECT_GE(Port(job, step), kSlurmStorePortBase);
      EXPECT_LT(Port(job, step), kSlurmStorePortBase + kSlurmStorePortCount);
      EXPECT_LT(Port(job, step), 32768);  // below the ephemeral range
    }
  }
  auto bad = SlurmStorePort("12a", "0");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("SLURM_JOB_ID='12a'"), std::string::npos);
  EXPECT_FALSE(SlurmStorePort("12", "").ok());
  EXPECT_FALSE(SlurmStorePort("", "0").ok());
}

TEST(SlurmStorePort, ConsecutiveJobsAndStepsNeverRepeat) {
  // Step 0 of 12000 consecutive jobs (the old job * 64 + step repeated
  // every 375 jobs), and 12000 consecutive steps of one job.
  for (uint64_t first : {1ull, 7000000ull}) {
    std::set<uint16_t> jobs, steps;
    for (uint64_t i = 0; i < 12000; ++i) {
      jobs.insert(Port(first + i, 0));
      steps.insert(Port(first, i));
    }
    EXPECT_EQ(jobs.size(), 12000u) << first;
    EXPECT_EQ(steps.size(), 12000u) << first;
  }
  // Neighbouring jobs' steps: no step 0-127 of job J meets one of job J+1
  // (the old formula gave step 64 of J the port of step 0 of J+1).
  for (uint64_t job = 5000; job < 5100; ++job) {
    std::set<uint16_t> mine;
    for (uint64_t s = 0; s < 128; ++s) mine.insert(Port(job, s));
    for (uint64_t s = 0; s < 128; ++s)
      EXPECT_EQ(mine.count(Port(job + 1, s)), 0u) << job << "." << s;
  }
  // Windows that are all apart (slurm.h): steps 0-7 of 1085 consecutive
  // jobs, 0-15 of 421, 0-31 of 243.
  for (auto [steps, jobs] : {std::pair<uint64_t, uint64_t>{8, 1085}, {16, 421}, {32, 243}}) {
    std::set<uint16_t> ports;
    for (uint64_t j = 0; j < jobs; ++j) {
      for (uint64_t s = 0; s < steps; ++s) ports.insert(Port(900000 + j, s));
    }
    EXPECT_EQ(ports.size(), steps * jobs) << steps << " steps of " << jobs << " jobs";
  }
}

TEST(SlurmStorePort, FarApartIdsCollideAsRandomOnesWould) {
  // Pairs of (job, step) drawn at random: the same port about once in 12000.
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<uint64_t> job(1, 100000000), step(0, 200);
  const int pairs = 1200000;
  int same = 0;
  for (int i = 0; i < pairs; ++i) same += Port(job(rng), step(rng)) == Port(job(rng), step(rng));
  const double expected = pairs / 12000.0;  // 100, give or take 10
  EXPECT_GT(same, expected * 0.6) << same;
  EXPECT_LT(same, expected * 1.4) << same;
  // And every port of the range is used (none favoured): 12000 consecutive
  // jobs at step 3 hit each once.
  std::set<uint16_t> all;
  for (uint64_t j = 0; j < 12000; ++j) all.insert(Port(777777 + j, 3));
  EXPECT_EQ(all.size(), 12000u);
}

}  // namespace
}  // namespace hora
