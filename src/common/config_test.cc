// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/config.h"

#include <gtest/gtest.h>

#include <set>

#include "common/clock.h"
#include "common/units.h"

namespace hora {
namespace {

TEST(Config, DefaultsComeFromTheTable) {
  auto c = ConfigFromEnv({});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->timeout_s, 0.0);  // no collective timeout: a slow rank is reported, not killed
  EXPECT_EQ(c->peer_timeout_s, 5.0);
  EXPECT_EQ(c->start_timeout_s, 120.0);
  EXPECT_EQ(c->stall_warning_s, 60.0);
  EXPECT_EQ(c->stall_shutdown_s, 0.0);
  EXPECT_EQ(c->log_level, LogLevel::kWarning);
  EXPECT_EQ(c->allreduce_algo, "");
  EXPECT_EQ(c->ring_segment_bytes, 256u * 1024u);
}

TEST(Config, ValuesOverrideDefaults) {
  auto c = ConfigFromEnv({{"HORA_TIMEOUT_S", "2.5"},
                          {"HORA_RING_SEGMENT_BYTES", "1M"},
                          {"HORA_LOG_LEVEL", "debug"},
                          {"HORA_ALLREDUCE_ALGO", "ring"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->timeout_s, 2.5);
  EXPECT_EQ(c->ring_segment_bytes, 1u << 20);
  EXPECT_EQ(c->log_level, LogLevel::kDebug);
  EXPECT_EQ(c->allreduce_algo, "ring");
}

TEST(Config, InvalidValuesNameVariableValueAndAccepted) {
  auto c = ConfigFromEnv({{"HORA_COST_ALPHA_US", "0"}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "HORA_COST_ALPHA_US='0' is invalid: expected a number greater than 0");
  auto d = ConfigFromEnv({{"HORA_RING_SEGMENT_BYTES", "0"}});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("HORA_RING_SEGMENT_BYTES='0'"), std::string::npos);
}

TEST(Config, WaitSpinIsANumberAndZeroTurnsItOff) {
  auto a = ConfigFromEnv({});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->wait_spin_us, 50.0);
  auto z = ConfigFromEnv({{"HORA_WAIT_SPIN_US", "0"}});
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->wait_spin_us, 0.0);
  auto bad = ConfigFromEnv({{"HORA_WAIT_SPIN_US", "-3"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "HORA_WAIT_SPIN_US='-3' is invalid: expected a number, 0 or greater");
}

TEST(Config, HierarchicalAllreduceIsAutoOnOneOrOff) {
  auto d = ConfigFromEnv({});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(HierarchyOf(*d), Hierarchy::kAuto);
  for (auto [value, want] :
       {std::pair{"1", Hierarchy::kOn}, std::pair{"0", Hierarchy::kOff},
        std::pair{"auto", Hierarchy::kAuto}, std::pair{"one", Hierarchy::kOne}}) {
    auto c = ConfigFromEnv({{"HORA_HIERARCHICAL_ALLREDUCE", value}});
    ASSERT_TRUE(c.ok()) << value;
    EXPECT_EQ(HierarchyOf(*c), want);
    EXPECT_EQ(std::string(HierarchyName(want)), value);
  }
  auto bad = ConfigFromEnv({{"HORA_HIERARCHICAL_ALLREDUCE", "yes"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "HORA_HIERARCHICAL_ALLREDUCE='yes' is invalid: expected one of 'auto|1|one|0'");
}

TEST(Config, SharedLinkEfficiencyIsAShareOfTheLink) {
  auto d = ConfigFromEnv({});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->cost_net_shared_efficiency, 1.0);
  auto c = ConfigFromEnv({{"HORA_COST_NET_SHARED_EFFICIENCY", "0.9"}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->cost_net_shared_efficiency, 0.9);
  for (const char* bad : {"0", "1.5", "-0.5"}) {
    auto b = ConfigFromEnv({{"HORA_COST_NET_SHARED_EFFICIENCY", bad}});
    EXPECT_FALSE(b.ok()) << bad;
    if (!b.ok()) {
      EXPECT_NE(b.status().message().find("HORA_COST_NET_SHARED_EFFICIENCY"), std::string::npos)
          << b.status().ToString();
    }
  }
}

// Durations are bounded (HORA_TIMEOUT_S=1e12 once overflowed the clock to
// "timed out after -9.22337e+09 s"), and the clock saturates anyway.
TEST(Config, DurationsAreBounded) {
  auto big = ConfigFromEnv({{"HORA_TIMEOUT_S", "1e12"}});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().message(),
            "HORA_TIMEOUT_S='1e12' is invalid: expected a number, 0 or greater and at most 1e+08");
  auto most = ConfigFromEnv({{"HORA_TIMEOUT_S", "1e8"}, {"HORA_STALL_WARNING_S", "1e8"}});
  ASSERT_TRUE(most.ok()) << most.status().ToString();
  const Duration d = SecondsToDuration(most->timeout_s);
  EXPECT_GT(d, std::chrono::hours(24 * 365 * 3));
  EXPECT_GT(DeadlineAfter(Clock::now(), d), Clock::now());
  EXPECT_EQ(SecondsToDuration(1e12), Duration::max());
  EXPECT_EQ(SecondsToDuration(-1), Duration::zero());
  EXPECT_EQ(DeadlineAfter(Clock::now(), Duration::max()), TimePoint::max());
}

// A peer timeout below a second would count a healthy pause as a lost
// rank: refused, saying the floor; 0 (off) and 1 are taken.
TEST(Config, PeerTimeoutHasAFloor) {
  for (const char* v : {"1e-9", "0.5", "0.999"}) {
    auto c = ConfigFromEnv({{"HORA_PEER_TIMEOUT_S", v}});
    ASSERT_FALSE(c.ok()) << v;
    EXPECT_EQ(c.status().message(), std::string("HORA_PEER_TIMEOUT_S='") + v +
                                        "' is invalid: expected 0 or a number of at least 1 "
                                        "and at most 1e+08");
  }
  for (const char* v : {"0", "1", "2.5"}) {
    auto c = ConfigFromEnv({{"HORA_PEER_TIMEOUT_S", v}});
    EXPECT_TRUE(c.ok()) << v << ": " << c.status().ToString();
  }
}

// --print-config says what each value counts: the response cache holds
// entries, not bytes.
TEST(Config, CacheCapacityCountsEntries) {
  auto c = ConfigFromEnv({{"HORA_CACHE_CAPACITY", "2K"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->cache_capacity, 2048u);
  const std::string all = FormatConfig(*c);
  EXPECT_NE(all.find("HORA_CACHE_CAPACITY=2048  # count, default '1024'"), std::string::npos)
      << all;
  auto bad = ConfigFromEnv({{"HORA_CACHE_CAPACITY", "many"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected a whole number (0 or more)"), std::string::npos)
      << bad.status().message();
}

TEST(Config, TableIsWellFormed) {
  std::set<std::string> names;
  for (const SettingSpec& s : AllSettings()) {
    EXPECT_EQ(std::string(s.name).rfind("HORA_", 0), 0u) << s.name;
    EXPECT_TRUE(names.insert(s.name).second) << "duplicate " << s.name;
    EXPECT_GT(std::string(s.doc).size(), 10u) << s.name;
  }
  auto c = ConfigFromEnv({});
  ASSERT_TRUE(c.ok());
  const std::string printed = FormatConfig(*c);
  for (const SettingSpec& s : AllSettings()) EXPECT_NE(printed.find(s.name), std::string::npos);
}

TEST(Config, UnknownSettingsAreListed) {
  auto unknown =
      UnknownSettings({{"HORA_TIMEOUT_S", "1"}, {"HORA_TIMOUT_S", "1"}, {"PATH", "/bin"}});
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_EQ(unknown[0], "HORA_TIMOUT_S");
}

TEST(Units, ParseBytes) {
  EXPECT_EQ(ParseBytes("0"), 0u);
  EXPECT_EQ(ParseBytes("4096"), 4096u);
  EXPECT_EQ(ParseBytes("64K"), 65536u);
  EXPECT_EQ(ParseBytes("64KiB"), 65536u);
  EXPECT_EQ(ParseBytes("4m"), 4u << 20);
  EXPECT_EQ(ParseBytes("1G"), 1u << 30);
  EXPECT_EQ(ParseBytes("12B"), 12u);
  EXPECT_FALSE(ParseBytes(""));
  EXPECT_FALSE(ParseBytes("K"));
  EXPECT_FALSE(ParseBytes("-1"));
  EXPECT_FALSE(ParseBytes("1.5M"));
  EXPECT_FALSE(ParseBytes("99999999999999999999"));
  EXPECT_FALSE(ParseBytes("17179869184G"));  // overflows 64 bits
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(65536), "64 KiB");
  EXPECT_EQ(FormatBytes(1536 * 1024), "1.5 MiB");
}

// HORA_BACKEND=nccl (Horovod's habit) is NCCL for GPU tensors with Hora's
// algorithms for the rest; with a HORA_GPU_BACKEND that says otherwise, it
// is an error naming both.
TEST(Config, BackendNcclMeansGpuBackendNccl) {
  auto c = ConfigFromEnv({{"HORA_BACKEND", "nccl"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->backend, "hora");
  EXPECT_EQ(c->gpu_backend, "nccl");
  auto clash = ConfigFromEnv({{"HORA_BACKEND", "nccl"}, {"HORA_GPU_BACKEND", "hora"}});
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.status().message().find("HORA_GPU_BACKEND=hora"), std::string::npos)
      << clash.status().ToString();
}

}  // namespace
}  // namespace hora
