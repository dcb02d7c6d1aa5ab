// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// ElasticPlanner: who is in each generation, and when the job ends.
#include "elastic_planner.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace hora::horarun {
namespace {

using Clock = ElasticPlanner::Clock;
constexpr auto kTimeout = std::chrono::seconds(30);

ElasticPlanner::Settings Bounds(int min_np, int max_np) {
  ElasticPlanner::Settings s;
  s.min_np = min_np;
  s.max_np = max_np;
  s.timeout = kTimeout;
  return s;
}

// Each member's rank, by id.
std::map<std::string, int> Ranks(const ElasticPlanner::Decision& d) {
  std::map<std::string, int> out;
  for (const auto& a : d.assign) out[a.id] = a.placement.rank;
  return out;
}

const Placement& PlaceOf(const ElasticPlanner::Decision& d, const std::string& id) {
  for (const auto& a : d.assign) {
    if (a.id == id) return a.placement;
  }
  ADD_FAILURE() << id << " has no place";
  static Placement none{};
  return none;
}

// Workers w0.. on the given hosts, started and arrived once: generation 1.
ElasticPlanner::Decision StartAll(ElasticPlanner& p, const std::vector<std::string>& hosts,
                                  Clock::time_point t) {
  for (size_t i = 0; i < hosts.size(); ++i) p.Started("w" + std::to_string(i), hosts[i], t);
  for (size_t i = 0; i < hosts.size(); ++i) p.Arrived("w" + std::to_string(i), 1, t);
  return p.Decide(t);
}

TEST(ElasticPlanner, TheFirstGenerationPlacesWorkersByHostWithHorovodsCrossRanks) {
  ElasticPlanner p(Bounds(2, 4));
  const Clock::time_point t{};
  p.Started("w0", "a", t);
  p.Started("w1", "b", t);
  p.Started("w2", "a", t);
  p.Arrived("w0", 1, t);
  p.Arrived("w1", 1, t);
  EXPECT_TRUE(p.Decide(t).assign.empty()) << "w2 has not arrived";
  p.Arrived("w2", 1, t);
  const auto d = p.Decide(t);
  EXPECT_EQ(d.generation, 1);
  EXPECT_EQ(Ranks(d), (std::map<std::string, int>{{"w0", 0}, {"w2", 1}, {"w1", 2}}));
  const Placement& b = PlaceOf(d, "w1");
  EXPECT_EQ(b.host, "b");
  EXPECT_EQ(b.local_rank, 0);
  EXPECT_EQ(b.local_size, 1);
  EXPECT_EQ(b.cross_rank, 1);
  EXPECT_EQ(b.cross_size, 2);
  EXPECT_EQ(PlaceOf(d, "w2").local_rank, 1);
  EXPECT_EQ(PlaceOf(d, "w2").cross_size, 1);
  for (const auto& a : d.assign) EXPECT_EQ(a.arrival, 1);
  EXPECT_TRUE(p.Decide(t).assign.empty()) << "answered arrivals form nothing more";
}

TEST(ElasticPlanner, SurvivorsKeepTheirOrderAndTheLowestIsRankZero) {
  ElasticPlanner p(Bounds(2, 4));
  const Clock::time_point t{};
  StartAll(p, {"a", "a", "b", "b"}, t);  // ranks 0 1 | 2 3
  // Rank 0 (w0, host a) is lost; the others come back to init().
  p.Ended("w0", t);
  for (const char* id : {"w1", "w2", "w3"}) p.Arrived(id, 2, t);
  const auto d = p.Decide(t);
  EXPECT_EQ(d.generation, 2);
  EXPECT_EQ(Ranks(d), (std::map<std::string, int>{{"w1", 0}, {"w2", 1}, {"w3", 2}}));
  EXPECT_EQ(PlaceOf(d, "w1").local_size, 1);
  EXPECT_EQ(PlaceOf(d, "w3").local_rank, 1);
  for (const auto& a : d.assign) EXPECT_EQ(a.arrival, 2);
  // Rank 0 of a host listed second: its host comes first now.
  p.Ended("w1", t);
  p.Arrived("w2", 3, t);
  p.Arrived("w3", 3, t);
  const auto e = p.Decide(t);
  EXPECT_EQ(Ranks(e), (std::map<std::string, int>{{"w2", 0}, {"w3", 1}}));
  EXPECT_EQ(PlaceOf(e, "w2").host, "b");
}

TEST(ElasticPlanner, KnowsEachWorkersLastPlace) {
  ElasticPlanner p(Bounds(1, 4));
  const Clock::time_point t{};
  p.Started("new", "a", t);
  EXPECT_FALSE(p.LastPlace("new").has_value()) << "no world yet";
  EXPECT_FALSE(p.LastPlace("nobody").has_value());
  p.Ended("new", t);
  StartAll(p, {"a", "a", "b"}, t);  // w0 w1 | w2: ranks 0 1 2 of world 1
  EXPECT_EQ(p.LastPlace("w2"), std::make_pair(int64_t{1}, 2));
  p.Ended("w0", t);
  p.Arrived("w1", 2, t);
  p.Arrived("w2", 2, t);
  ASSERT_EQ(p.Decide(t).generation, 2);
  EXPECT_EQ(p.LastPlace("w2"), std::make_pair(int64_t{2}, 1));
  EXPECT_EQ(p.LastPlace("w0"), std::make_pair(int64_t{1}, 0)) << "its last, before it ended";
}

TEST(ElasticPlanner, NewWorkersComeAfterTheSurvivorsOfTheirHost) {
  ElasticPlanner p(Bounds(1, 8));
  const Clock::time_point t{};
  StartAll(p, {"a", "b"}, t);  // w0 a:0, w1 b:1
  p.Started("w2", "c", t);     // a new host
  p.Started("w3", "a", t);     // and a new slot on a
  for (const char* id : {"w2", "w3"}) p.Arrived(id, 1, t);
  EXPECT_TRUE(p.Decide(t).assign.empty()) << "the survivors are still training";
  p.Arrived("w0", 2, t);
  p.Arrived("w1", 2, t);
  const auto d = p.Decide(t);
  EXPECT_EQ(Ranks(d), (std::map<std::string, int>{{"w0", 0}, {"w3", 1}, {"w1", 2}, {"w2", 3}}));
  EXPECT_EQ(PlaceOf(d, "w3").local_rank, 1);
  EXPECT_EQ(PlaceOf(d, "w2").host, "c");
}

// What horarun exports at spawn: the placement each worker would get if
// every live one came, newcomers after the survivors of their host; the
// planner itself is unchanged.
TEST(ElasticPlanner, AProspectIsTheNextWorldIfEveryoneCame) {
  ElasticPlanner p(Bounds(1, 8));
  const Clock::time_point t{};
  const auto first = p.Prospect({{"w0", "a"}, {"w1", "b"}, {"w2", "a"}}, t);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first.at("w0").rank, 0);
  EXPECT_EQ(first.at("w2").rank, 1) << "host a's ranks first";
  EXPECT_EQ(first.at("w2").local_rank, 1);
  EXPECT_EQ(first.at("w2").local_size, 2);
  EXPECT_EQ(first.at("w1").rank, 2);
  EXPECT_EQ(first.at("w1").cross_rank, 1);
  EXPECT_EQ(first.at("w1").cross_size, 2);
  EXPECT_EQ(p.live(), 0) << "a prospect starts nobody";

  StartAll(p, {"a", "b"}, t);  // w0 a:0, w1 b:1
  p.Ended("w0", t);
  const auto next = p.Prospect({{"w9", "a"}, {"w8", "c"}}, t);
  ASSERT_EQ(next.size(), 3u) << "w1, and the two newcomers";
  EXPECT_EQ(next.at("w1").rank, 0) << "the survivor's host first";
  EXPECT_EQ(next.at("w9").rank, 1);
  EXPECT_EQ(next.at("w9").local_rank, 0);
  EXPECT_EQ(next.at("w8").rank, 2);
  EXPECT_EQ(p.live(), 1);
  EXPECT_EQ(p.generation(), 1);
}

// New workers (a host the discovery script added) wait in init() while the
// members train on: nobody is stopped for being late, however long that
// takes. The members come at their next commit, and the world grows.
TEST(ElasticPlanner, NewWorkersWaitForTheMembersWithoutATimeout) {
  ElasticPlanner p(Bounds(2, 3));
  Clock::time_point t{};
  StartAll(p, {"a", "a"}, t);  // w0, w1: a world of 2
  p.Started("w2", "a", t);
  p.Arrived("w2", 1, t);
  EXPECT_EQ(p.NextDeadline(), Clock::time_point::max());
  t += 10 * kTimeout;
  auto d = p.Decide(t);
  EXPECT_TRUE(d.stop.empty());
  EXPECT_TRUE(d.assign.empty());
  p.Arrived("w0", 2, t);
  EXPECT_EQ(p.NextDeadline(), t + kTimeout) << "a member's arrival starts the round";
  p.Arrived("w1", 2, t);
  d = p.Decide(t);
  EXPECT_EQ(d.generation, 2);
  EXPECT_EQ(Ranks(d), (std::map<std::string, int>{{"w0", 0}, {"w1", 1}, {"w2", 2}}));
}

TEST(ElasticPlanner, AWorkerThatNeverComesIsStoppedAfterTheTimeout) {
  ElasticPlanner p(Bounds(2, 4));
  Clock::time_point t{};
  StartAll(p, {"a", "a", "a"}, t);
  p.Arrived("w0", 2, t);
  p.Arrived("w2", 2, t);  // w1 hangs, neither training nor here
  EXPECT_EQ(p.NextDeadline(), t + kTimeout);
  t += kTimeout - std::chrono::seconds(1);
  EXPECT_TRUE(p.Decide(t).assign.empty());
  t += std::chrono::seconds(1);
  const auto d = p.Decide(t);
  EXPECT_EQ(d.stop, std::vector<std::string>{"w1"});
  EXPECT_TRUE(d.surplus.empty()) << "w1 was late, not one too many";
  EXPECT_EQ(Ranks(d), (std::map<std::string, int>{{"w0", 0}, {"w2", 1}}));
  EXPECT_EQ(p.live(), 2);
  EXPECT_EQ(p.NextDeadline(), Clock::time_point::max());
  p.Arrived("w1", 2, t);  // (too late: left out)
  EXPECT_TRUE(p.Decide(t).assign.empty());
}

// A worker stopped for not coming leaves too few: the others have waited
// since the round began, so the end comes then, not a timeout later.
TEST(ElasticPlanner, TooFewAfterAStopEndsFromTheRoundsStart) {
  ElasticPlanner p(Bounds(3, 3));
  Clock::time_point t{};
  StartAll(p, {"a", "a", "a"}, t);
  p.Arrived("w0", 2, t);
  p.Arrived("w2", 2, t);
  const auto stop = p.Decide(t + kTimeout);
  EXPECT_EQ(stop.stop, std::vector<std::string>{"w1"});
  EXPECT_FALSE(stop.end.has_value());
  EXPECT_EQ(p.NextDeadline(), t + kTimeout);
  const auto end = p.Decide(t + kTimeout);
  ASSERT_TRUE(end.end.has_value());
  EXPECT_NE(end.end->find("only 2 worker(s) left, fewer than --min-np 3, for 30 s"),
            std::string::npos)
      << *end.end;
}

TEST(ElasticPlanner, BelowMinNpForTheTimeoutEndsTheJobNamingTheCounts) {
  ElasticPlanner p(Bounds(3, 4));
  Clock::time_point t{};
  EXPECT_EQ(StartAll(p, {"a", "a", "a"}, t).assign.size(), 3u);
  p.Ended("w2", t);
  p.Arrived("w0", 2, t);
  p.Arrived("w1", 2, t);
  EXPECT_EQ(p.NextDeadline(), t + kTimeout);
  const auto wait = p.Decide(t + kTimeout - std::chrono::seconds(1));
  EXPECT_TRUE(wait.assign.empty() && !wait.end);
  // A worker started in time saves the job.
  ElasticPlanner q(Bounds(3, 4));
  StartAll(q, {"a", "a", "a"}, t);
  q.Ended("w2", t);
  q.Arrived("w0", 2, t);
  q.Arrived("w1", 2, t);
  q.Started("w3", "b", t + std::chrono::seconds(10));
  q.Arrived("w3", 1, t + std::chrono::seconds(11));
  EXPECT_EQ(q.Decide(t + std::chrono::seconds(11)).assign.size(), 3u);
  // Without one, the end.
  const auto end = p.Decide(t + kTimeout);
  ASSERT_TRUE(end.end.has_value());
  EXPECT_EQ(*end.end,
            "only 2 worker(s) left, fewer than --min-np 3, for 30 s (--elastic-timeout 30 s)");
  EXPECT_TRUE(p.ended());
  EXPECT_TRUE(p.Decide(t + kTimeout).assign.empty());
}

// Below min_np, the job says at once what it waits for, and again every
// minute, until enough come or the timeout ends it.
TEST(ElasticPlanner, BelowMinNpSaysWhatItWaitsForEveryMinute) {
  ElasticPlanner::Settings s = Bounds(3, 4);
  s.timeout = std::chrono::seconds(600);
  ElasticPlanner p(s);
  Clock::time_point t{};
  StartAll(p, {"a", "a", "a"}, t);
  EXPECT_FALSE(p.Decide(t).notice.has_value());
  p.Ended("w2", t);
  p.Arrived("w0", 2, t);
  const auto first = p.Decide(t);
  ASSERT_TRUE(first.notice.has_value());
  EXPECT_EQ(*first.notice,
            "waiting for workers: 2 of --min-np 3, up to 600 s more "
            "(--elastic-timeout)");
  EXPECT_FALSE(p.Decide(t + std::chrono::seconds(30)).notice.has_value());
  EXPECT_EQ(p.NextDeadline(), t + std::chrono::seconds(60));
  const auto again = p.Decide(t + std::chrono::seconds(60));
  ASSERT_TRUE(again.notice.has_value());
  EXPECT_EQ(*again.notice,
            "waiting for workers: 2 of --min-np 3, up to 540 s more "
            "(--elastic-timeout)");
  // Enough again: nothing more to say.
  p.Started("w3", "b", t + std::chrono::seconds(70));
  EXPECT_FALSE(p.Decide(t + std::chrono::seconds(130)).notice.has_value());
}

// Below min_np after a host is removed, its workers leave at the next
// commit and the others train on with them until then: the timeout counts
// from when a member comes to init() for the next world, and nothing is
// said before. With no worker live it counts at once.
TEST(ElasticPlanner, BelowMinNpTheTimeoutCountsFromTheMembersArrival) {
  ElasticPlanner p(Bounds(2, 3));
  Clock::time_point t{};
  StartAll(p, {"a", "b"}, t);
  p.Ended("w1", t);  // (host b removed: w1 leaves; w0 trains on)
  EXPECT_EQ(p.NextDeadline(), Clock::time_point::max());
  const auto training = p.Decide(t + 2 * kTimeout);
  EXPECT_FALSE(training.end.has_value());
  EXPECT_FALSE(training.notice.has_value());
  const auto arrival = t + 2 * kTimeout + std::chrono::seconds(5);
  p.Arrived("w0", 2, arrival);  // the commit: w0 waits for a world
  const auto said = p.Decide(arrival);
  ASSERT_TRUE(said.notice.has_value());
  EXPECT_NE(said.notice->find("up to 30 s more"), std::string::npos) << *said.notice;
  EXPECT_EQ(p.NextDeadline(), arrival + kTimeout);
  EXPECT_FALSE(p.Decide(arrival + kTimeout - std::chrono::seconds(1)).end.has_value());
  const auto end = p.Decide(arrival + kTimeout);
  ASSERT_TRUE(end.end.has_value());
  EXPECT_NE(end.end->find("for 30 s"), std::string::npos) << *end.end;

  ElasticPlanner q(Bounds(2, 3));
  StartAll(q, {"a", "b"}, t);
  q.Ended("w0", t);
  q.Ended("w1", t);
  EXPECT_EQ(q.NextDeadline(), t + kTimeout);
  EXPECT_TRUE(q.Decide(t + kTimeout).end.has_value());
}

// With no discovery script no worker can come: below min_np the job ends at
// once, whoever is waiting (a second loss during a re-formation too).
TEST(ElasticPlanner, BelowMinNpWithNoWayToGrowEndsAtOnce) {
  ElasticPlanner::Settings s = Bounds(2, 3);
  s.can_grow = false;
  ElasticPlanner p(s);
  Clock::time_point t{};
  StartAll(p, {"a", "a", "a"}, t);
  p.Ended("w2", t);
  p.Arrived("w0", 2, t);
  EXPECT_FALSE(p.Decide(t).end.has_value());  // 2 left: enough (w1 comes to re-form)
  p.Ended("w1", t + std::chrono::milliseconds(300));
  const auto end = p.Decide(t + std::chrono::milliseconds(300));
  ASSERT_TRUE(end.end.has_value());
  EXPECT_EQ(*end.end,
            "only 1 worker(s) left, fewer than --min-np 2, and no new worker can come "
            "(no --host-discovery-script)");
  EXPECT_TRUE(p.ended());
}

TEST(ElasticPlanner, PastMaxNpTheNewestAreStopped) {
  ElasticPlanner p(Bounds(1, 3));
  const Clock::time_point t{};
  const auto d = StartAll(p, {"a", "a", "b", "b"}, t);
  EXPECT_EQ(d.stop, std::vector<std::string>{"w3"});
  EXPECT_EQ(d.surplus, std::vector<std::string>{"w3"});
  EXPECT_EQ(Ranks(d), (std::map<std::string, int>{{"w0", 0}, {"w1", 1}, {"w2", 2}}));
  EXPECT_EQ(p.live(), 3);
}

TEST(ElasticPlanner, TheResetLimitEndsTheJob) {
  auto settings = Bounds(1, 4);
  settings.reset_limit = 1;
  ElasticPlanner p(settings);
  const Clock::time_point t{};
  StartAll(p, {"a", "a"}, t);  // generation 1: no reset
  p.Arrived("w0", 2, t);
  p.Arrived("w1", 2, t);
  EXPECT_EQ(p.Decide(t).generation, 2);  // the first reset
  p.Arrived("w0", 3, t);
  p.Arrived("w1", 3, t);
  const auto d = p.Decide(t);
  ASSERT_TRUE(d.end.has_value());
  EXPECT_EQ(*d.end, "another reset would be more than --reset-limit 1 (1 so far)");
}

TEST(ElasticPlanner, StaleArrivalsAndUnknownWorkersChangeNothing) {
  ElasticPlanner p(Bounds(1, 4));
  const Clock::time_point t{};
  StartAll(p, {"a", "a"}, t);
  p.Arrived("w0", 1, t);  // (answered already)
  p.Arrived("nobody", 5, t);
  p.Ended("nobody", t);
  EXPECT_TRUE(p.Decide(t).assign.empty());
  EXPECT_EQ(p.live(), 2);
  EXPECT_EQ(p.generation(), 1);
}

}  // namespace
}  // namespace hora::horarun
