// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The cost model's flat against hierarchical prediction
// (hierarchy_cost.h), against sums worked by hand from the alpha-beta-gamma
// formulas, where it turns from flat to hierarchical, and where one rank a
// host crossing beats every rank crossing.
#include "collectives/hierarchy_cost.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace hora {
namespace {

// Round costs: 1 us and 1 GB/s within a host, 10 us and 0.1 GB/s between
// hosts, reduction at 10 GB/s.
// `shared`: HORA_COST_NET_SHARED_EFFICIENCY.
Selector MakeSelector(const std::string& algo, const std::string& shared = "1") {
  std::map<std::string, std::string> env = {{"HORA_COST_ALPHA_US", "1"},
                                            {"HORA_COST_BANDWIDTH_GBPS", "1"},
                                            {"HORA_COST_REDUCE_GBPS", "10"},
                                            {"HORA_COST_NET_ALPHA_US", "10"},
                                            {"HORA_COST_NET_BANDWIDTH_GBPS", "0.1"},
                                            {"HORA_COST_NET_SHARED_EFFICIENCY", shared},
                                            {"HORA_ALLREDUCE_ALGO", algo}};
  auto c = ConfigFromEnv(env);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  auto s = Selector::Create(*c);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

TEST(HierarchyCost, WorkedExampleTwoHostsOfTwoRingEverywhere) {
  const HierarchyPrediction p = PredictHierarchy(MakeSelector("ring"), 2, 2, 1000);
  ASSERT_NE(p.flat, nullptr);
  ASSERT_NE(p.across, nullptr);
  EXPECT_EQ(std::string(p.flat->name), "ring");
  EXPECT_EQ(std::string(p.across->name), "ring");
  // Flat ring of 4: 6 steps crossing once each with 250 B.
  EXPECT_NEAR(p.flat_s, 6 * (10e-6 + 250 * 1e-8) + 750 * 1e-10, 1e-12);
  // Within the host, a ring of 2 over 500 B blocks: reduce-scatter and
  // allgather one step each, half the bytes reduced; across, a ring of 2
  // hosts over the 500 B block, both places sharing the link.
  const double within = 2 * (1e-6 + 500 * 1e-9) + 500 * 1e-10;
  const double across = 2 * (10e-6 + 250 * 1e-8 * 2) + 250 * 1e-10;
  EXPECT_NEAR(p.hierarchical_s, within + across, 1e-12);
  EXPECT_TRUE(p.hierarchical_faster());
  // One rank a host: the ring reduce-scatter (one step of 500 B, half the
  // bytes reduced: the hierarchy's within-host cost without its
  // allgather's step), a gather of 500 B, a ring of 2 hosts over the whole
  // 1000 B alone on the link (half of it reduced there), and the broadcast
  // of 1000 B within the host (the binomial tree: one step).
  ASSERT_NE(p.across_one, nullptr);
  ASSERT_NE(p.broadcast_one, nullptr);
  EXPECT_EQ(std::string(p.across_one->name), "ring");
  EXPECT_EQ(std::string(p.broadcast_one->name), "binomial");
  const double reduce_scatter = (1e-6 + 500 * 1e-9) + 500 * 1e-10;
  const double gather = 1e-6 + 500 * 1e-9;
  const double alone = 2 * (10e-6 + 500 * 1e-8) + 500 * 1e-10;
  const double broadcast = 1e-6 + 1000 * 1e-9;
  EXPECT_NEAR(p.one_s, reduce_scatter + gather + alone + broadcast, 1e-12);
  EXPECT_FALSE(p.one_faster()) << "a link that loses nothing shared: every rank crosses";
}

TEST(HierarchyCost, OneRankAHostWhereSharedLinksLoseBandwidthAndMessagesAreLarge) {
  for (auto [hosts, per_host] : {std::pair{2, 2}, std::pair{4, 2}, std::pair{2, 4}}) {
    for (size_t bytes : {size_t{8}, size_t{64} << 10, size_t{64} << 20}) {
      // Links that lose nothing: every rank crossing is never slower.
      const HierarchyPrediction whole = PredictHierarchy(MakeSelector(""), hosts, per_host, bytes);
      EXPECT_FALSE(whole.one_faster()) << hosts << "x" << per_host << ", " << bytes << " B";
      // A link shared by several transfers giving them 80% of its
      // bandwidth: the crossings of 64 KiB and 64 MiB take 1/0.8 as long
      // with every rank crossing, more than the gather and broadcast within
      // the host (on links ten times faster) cost; 8 B is not worth those
      // two steps.
      const HierarchyPrediction lossy =
          PredictHierarchy(MakeSelector("", "0.8"), hosts, per_host, bytes);
      EXPECT_EQ(lossy.one_faster(), bytes > 8)
          << hosts << "x" << per_host << ", " << bytes << " B: one " << lossy.one_s << " s, every "
          << lossy.hierarchical_s << " s";
      EXPECT_EQ(lossy.one_s, whole.one_s) << "one transfer a link shares it with none";
    }
  }
}

TEST(HierarchyCost, FlatForFewBytesHierarchicalForMany) {
  const Selector s = MakeSelector("");
  for (auto [hosts, per_host] : {std::pair{2, 2}, std::pair{4, 2}, std::pair{2, 4}}) {
    // 8 B: flat recursive doubling crosses once (log2(hosts) times); the
    // hierarchy adds 2 (per_host - 1) steps within the host to as many
    // crossings.
    const HierarchyPrediction few = PredictHierarchy(s, hosts, per_host, 8);
    EXPECT_FALSE(few.hierarchical_faster()) << hosts << "x" << per_host;
    EXPECT_EQ(std::string(few.flat->name), "recursive_doubling");
    // 64 MiB: each link carries 2 (H-1)/H of the message in the hierarchy,
    // at least 2 (n-1)/n flat.
    const HierarchyPrediction many = PredictHierarchy(s, hosts, per_host, 64 << 20);
    EXPECT_TRUE(many.hierarchical_faster()) << hosts << "x" << per_host;
    EXPECT_EQ(std::string(many.flat->name), "ring") << "the links make the flat choice";
    const double n = hosts * per_host, link_s = (64 << 20) * 1e-8;
    EXPECT_GT(many.flat_s, 2 * (n - 1) / n * link_s);
    EXPECT_GT(many.hierarchical_s, 2.0 * (hosts - 1) / hosts * link_s);
    EXPECT_LT(many.hierarchical_s, many.flat_s);
  }
}

TEST(HierarchyCost, AFastNetworkKeepsLargeMessagesFlat) {
  // The network as fast as the host: the hierarchy's steps within the host
  // cost more than the crossings they save.
  std::map<std::string, std::string> env = {{"HORA_COST_NET_ALPHA_US", "2"},
                                            {"HORA_COST_NET_BANDWIDTH_GBPS", "8"}};
  auto c = ConfigFromEnv(env);
  ASSERT_TRUE(c.ok());
  auto s = Selector::Create(*c);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(PredictHierarchy(*s, 2, 2, 64 << 20).hierarchical_faster());
}

}  // namespace
}  // namespace hora
