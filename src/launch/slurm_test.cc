// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "launch/slurm.h"

#include <gtest/gtest.h>

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

TEST(SlurmStorePort, DeterministicInItsRangeAndApartForStepsAndJobs) {
  const uint16_t p = *SlurmStorePort("123456", "0");
  EXPECT_EQ(p, *SlurmStorePort("123456", "0"));
  EXPECT_EQ(p, kSlurmStorePortBase + (123456 % 12000 * 64) % 12000);
  std::set<uint16_t> ports;
  for (int job = 1000; job < 1100; ++job) {
    for (int step = 0; step < 4; ++step) {
      const uint16_t port = *SlurmStorePort(std::to_string(job), std::to_string(step));
      EXPECT_GE(port, kSlurmStorePortBase);
      EXPECT_LT(port, kSlurmStorePortBase + kSlurmStorePortCount);
      EXPECT_LT(port, 32768);  // below the ephemeral range
      ports.insert(port);
    }
  }
  EXPECT_EQ(ports.size(), 400u);  // 100 consecutive jobs x 4 steps: all apart
  EXPECT_LT(*SlurmStorePort("18446744073709551", "4294967294"), 32768);  // large ids
  auto bad = SlurmStorePort("12a", "0");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("SLURM_JOB_ID='12a'"), std::string::npos);
  EXPECT_FALSE(SlurmStorePort("12", "").ok());
  EXPECT_FALSE(SlurmStorePort("", "0").ok());
}

}  // namespace
}  // namespace hora
