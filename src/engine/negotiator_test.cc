// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The negotiator alone, over a fake control plane (tests/support): each rank
// a thread, each cycle checked against what the rules of docs/dev/design.md §4 say
// every rank decides -- the slow path once, the cache after; mismatches
// failed on every rank; groups whole; the carried allreduce; stops, joins,
// invalidations and control-plane failures.
#include "engine/negotiator.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/fake_control_plane.h"

namespace hora {
namespace {

using testing::FakeControlWorld;

Config TestConfig() {
  Result<Config> c = ConfigFromEnv({});
  EXPECT_TRUE(c.ok());
  return *c;
}

RequestMeta Allreduce(const std::string& name, int64_t elements) {
  RequestMeta m;
  m.name = name;
  m.op = OpType::kAllreduce;
  m.dtype = DataType::kFloat32;
  m.shape = {elements};
  return m;
}

// What one rank's cycle came to, in names.
struct CycleView {
  Status status;
  std::vector<std::string> batches;  // "a+b": the names of each batch, in order
  std::vector<std::string> errors;   // "a: <error>"
  std::vector<std::string> joins;    // announcements "<rank>:<last>"
  std::vector<std::string> placeholders;
  bool carried = false;
  bool stop = false;
  bool idle = false;  // CycleOutcome::idle_everywhere
  NegotiationCounts counts;
};

// N negotiators over one fake world; the test plays each rank's engine.
class World {
 public:
  explicit World(int n, Config config = TestConfig()) : fake_(n), ranks_(static_cast<size_t>(n)) {
    for (int r = 0; r < n; ++r) {
      Rank& rank = ranks_[static_cast<size_t>(r)];
      rank.negotiator = std::make_unique<Negotiator>(
          config, fake_.plane(r), Logger(LogLevel::kOff, r), "", std::vector<int>{},
          [&rank](const std::string& name) -> Ticket* {
            auto it = rank.taken.find(name);
            return it == rank.taken.end() ? nullptr : it->second.get();
          });
    }
  }

  FakeControlWorld& fake() { return fake_; }
  Negotiator& negotiator(int r) { return *ranks_[static_cast<size_t>(r)].negotiator; }

  // Rank r submits `m`, data in `in`/`out` (count from m).
  void Submit(int r, RequestMeta m, float* in = nullptr, float* out = nullptr) {
    Rank& rank = ranks_[static_cast<size_t>(r)];
    auto& slot = rank.taken[m.name];
    if (!slot) slot = std::make_unique<Ticket>();
    slot->meta = std::move(m);
    slot->input = in;
    slot->output = out;
    rank.fresh.push_back(slot.get());
  }

  // One cycle on every rank at once; finishes what ran or failed (as the
  // engine would) and returns each rank's view.
  std::vector<CycleView> Cycle(std::vector<int> stopping = {}) {
    std::vector<CycleView> views(ranks_.size());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      const bool stops = std::find(stopping.begin(), stopping.end(), r) != stopping.end();
      threads.emplace_back([this, r, stops, &views] { views[r] = RunCycle(r, stops); });
    }
    for (auto& t : threads) t.join();
    return views;
  }

  size_t taken(int r) const { return ranks_[static_cast<size_t>(r)].taken.size(); }

 private:
  struct Rank {
    std::unique_ptr<Negotiator> negotiator;
    std::map<std::string, std::unique_ptr<Ticket>> taken;
    std::vector<Ticket*> fresh;
  };

  CycleView RunCycle(size_t r, bool stopping) {
    Rank& rank = ranks_[r];
    CycleView v;
    const TimePoint now = Clock::now();
    for (Ticket* t : rank.fresh) rank.negotiator->Take(t, now);
    const bool quiet = rank.fresh.empty();
    rank.fresh.clear();
    CycleOutcome* o = nullptr;
    v.status = rank.negotiator->Negotiate(stopping, quiet, now, &o);
    v.counts = o->counts;
    if (!v.status.ok()) return v;
    v.carried = o->carried;
    v.stop = o->stop_everywhere;
    v.idle = o->idle_everywhere;
    auto finish = [&](const std::string& name) {
      auto it = rank.taken.find(name);
      if (it == rank.taken.end()) return;
      rank.negotiator->Release(it->second.get());
      rank.taken.erase(it);
    };
    if (o->carried) {
      std::string names;
      std::vector<std::string> done;
      for (Ticket* t : o->carried_batch) {
        names += (names.empty() ? "" : "+") + t->meta.name;
        done.push_back(t->meta.name);
      }
      v.batches.push_back(names);
      for (const auto& n : done) finish(n);
      return v;
    }
    for (const Decision& d : o->decisions) {
      const Response& resp = *d.response;
      if (resp.params.op == OpType::kJoin && !resp.error.empty()) {
        v.errors.push_back(resp.params.name + ": " + resp.error);
        continue;
      }
      if (resp.params.op == OpType::kJoin) {
        v.joins.push_back(std::to_string(resp.rows.at(0)) + ":" + std::to_string(resp.rows.at(1)));
        if (resp.rows.at(1) == 1) finish(resp.params.name);
        continue;
      }
      if (d.placeholder && rank.taken.count(resp.params.name) == 0) {
        v.placeholders.push_back(resp.params.name);
      }
      if (!resp.error.empty()) {
        v.errors.push_back(resp.params.name + ": " + resp.error);
        finish(resp.params.name);
      }
    }
    std::vector<std::string> ran;
    for (const auto& batch : o->batches) {
      std::string names;
      for (size_t i : batch) {
        const std::string& name = o->decisions[i].response->params.name;
        names += (names.empty() ? "" : "+") + name;
        ran.push_back(name);
      }
      v.batches.push_back(names);
    }
    for (const auto& n : ran) finish(n);
    return v;
  }

  FakeControlWorld fake_;
  std::vector<Rank> ranks_;
};

TEST(Negotiator, FirstCycleAsksTheCoordinatorLaterOnesRunFromTheCache) {
  for (int n : {1, 2, 3, 5}) {
    World w(n);
    for (int r = 0; r < n; ++r) w.Submit(r, Allreduce("a", 4));
    for (const CycleView& v : w.Cycle()) {
      ASSERT_TRUE(v.status.ok()) << v.status.ToString();
      EXPECT_EQ(v.batches, std::vector<std::string>{"a"}) << "np " << n;
      EXPECT_EQ(v.counts.misses, 1u);
      EXPECT_EQ(v.counts.slow_cycles, 1u);
    }
    EXPECT_EQ(w.fake().calls().gathers, 1);
    for (int r = 0; r < n; ++r) w.Submit(r, Allreduce("a", 4));
    for (const CycleView& v : w.Cycle()) {
      EXPECT_EQ(v.batches, std::vector<std::string>{"a"});
      EXPECT_EQ(v.counts.hits, 1u);
      EXPECT_EQ(v.counts.slow_cycles, 0u);
    }
    EXPECT_EQ(w.fake().calls().gathers, 1) << "the cached cycle asked the coordinator";
    EXPECT_EQ(w.fake().calls().ands, 2);
  }
}

TEST(Negotiator, ATensorSubmittedBySomeRanksWaitsForTheRest) {
  World w(3);
  w.Submit(0, Allreduce("x", 2));
  w.Submit(2, Allreduce("x", 2));
  for (const CycleView& v : w.Cycle()) EXPECT_TRUE(v.batches.empty());
  w.Submit(1, Allreduce("x", 2));
  for (const CycleView& v : w.Cycle()) EXPECT_EQ(v.batches, std::vector<std::string>{"x"});
  for (int r = 0; r < 3; ++r) EXPECT_EQ(w.taken(r), 0u);
}

// Idle everywhere: no rank has a tensor taken, not even one that waits for
// the others (which still need the idle ranks' cycles for stall reports).
TEST(Negotiator, ACycleIsIdleEverywhereOnlyWhereNoRankHasTensors) {
  for (int n : {2, 3}) {
    World w(n);
    for (const CycleView& v : w.Cycle()) EXPECT_TRUE(v.idle) << "np " << n;
    w.Submit(n - 1, Allreduce("x", 2));
    for (const CycleView& v : w.Cycle()) EXPECT_FALSE(v.idle) << "np " << n;
    // Still waiting on the others, and no new submission.
    for (const CycleView& v : w.Cycle()) EXPECT_FALSE(v.idle) << "np " << n;
    for (int r = 0; r < n - 1; ++r) w.Submit(r, Allreduce("x", 2));
    for (const CycleView& v : w.Cycle()) {
      EXPECT_EQ(v.batches, std::vector<std::string>{"x"}) << "np " << n;
      EXPECT_FALSE(v.idle);
    }
    for (const CycleView& v : w.Cycle()) EXPECT_TRUE(v.idle) << "np " << n;
  }
}

TEST(Negotiator, MismatchedShapesFailOnEveryRankNamingTheValues) {
  World w(3);
  w.Submit(0, Allreduce("a", 4));
  w.Submit(1, Allreduce("a", 5));
  w.Submit(2, Allreduce("a", 4));
  for (const CycleView& v : w.Cycle()) {
    EXPECT_TRUE(v.batches.empty());
    ASSERT_EQ(v.errors.size(), 1u);
    EXPECT_NE(v.errors[0].find("float32[5]"), std::string::npos) << v.errors[0];
    EXPECT_NE(v.errors[0].find("float32[4]"), std::string::npos) << v.errors[0];
  }
}

TEST(Negotiator, AllreducesOfOneKindFuseUpToTheThreshold) {
  Config c = TestConfig();
  c.fusion_threshold_bytes = 64;  // two float32[8], not three
  World w(2, c);
  for (int r = 0; r < 2; ++r) {
    for (const char* name : {"a", "b", "c"}) w.Submit(r, Allreduce(name, 8));
  }
  for (const CycleView& v : w.Cycle()) {
    EXPECT_EQ(v.batches, (std::vector<std::string>{"a+b", "c"}));
  }
}

TEST(Negotiator, AGroupRunsOnlyWhole) {
  World w(2);
  auto member = [](int i) {
    RequestMeta m = Allreduce("g." + std::to_string(i), 2);
    m.group = "g";
    m.group_size = 2;
    return m;
  };
  for (int r = 0; r < 2; ++r) {
    w.Submit(r, member(0));
    w.Submit(r, member(1));
  }
  for (const CycleView& v : w.Cycle()) EXPECT_EQ(v.batches, std::vector<std::string>{"g.0+g.1"});
  // Cached now: rank 1 has one member ready, rank 0 both.
  w.Submit(0, member(0));
  w.Submit(0, member(1));
  w.Submit(1, member(0));
  for (const CycleView& v : w.Cycle()) EXPECT_TRUE(v.batches.empty());
  w.Submit(1, member(1));
  for (const CycleView& v : w.Cycle()) EXPECT_EQ(v.batches, std::vector<std::string>{"g.0+g.1"});
}

TEST(Negotiator, ACachedAllreduceGoesWithTheAndWhenEveryRankHasIt) {
  World w(3);
  w.fake().set_carry(true);
  std::vector<std::vector<float>> in(3), out(3);
  for (int r = 0; r < 3; ++r) {
    in[r] = {1.0f * r, 2.0f, 0.5f};
    out[r].assign(3, -1.0f);
  }
  for (int r = 0; r < 3; ++r) w.Submit(r, Allreduce("a", 3));
  for (const CycleView& v : w.Cycle()) EXPECT_FALSE(v.carried);  // (not cached yet)
  for (int r = 0; r < 3; ++r) w.Submit(r, Allreduce("a", 3), in[r].data(), out[r].data());
  for (const CycleView& v : w.Cycle()) {
    EXPECT_TRUE(v.carried);
    EXPECT_EQ(v.batches, std::vector<std::string>{"a"});
  }
  EXPECT_EQ(w.fake().calls().carried_runs, 1);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(out[r], (std::vector<float>{3.0f, 6.0f, 1.5f}));
}

TEST(Negotiator, ACarryTheRanksDisagreeOnRunsWhatIsReadyEverywhere) {
  World w(2);
  w.fake().set_carry(true);
  for (int r = 0; r < 2; ++r) {
    w.Submit(r, Allreduce("a", 2));
    w.Submit(r, Allreduce("b", 2));
  }
  w.Cycle();
  std::vector<float> in(2, 1.0f), out0(4), out1(4);
  w.Submit(0, Allreduce("a", 2), in.data(), out0.data());
  w.Submit(0, Allreduce("b", 2), in.data(), out0.data() + 2);
  w.Submit(1, Allreduce("a", 2), in.data(), out1.data());
  for (const CycleView& v : w.Cycle()) {
    EXPECT_FALSE(v.carried);
    EXPECT_EQ(v.batches, std::vector<std::string>{"a"});
  }
  EXPECT_EQ(w.fake().calls().carried_runs, 0);
  w.Submit(1, Allreduce("b", 2), in.data(), out1.data() + 2);
  for (const CycleView& v : w.Cycle()) EXPECT_EQ(v.batches, std::vector<std::string>{"b"});
}

TEST(Negotiator, ChangedParametersInvalidateTheCachedEntryOnEveryRank) {
  World w(2);
  for (int r = 0; r < 2; ++r) w.Submit(r, Allreduce("a", 4));
  w.Cycle();
  for (int r = 0; r < 2; ++r) w.Submit(r, Allreduce("a", 8));
  for (const CycleView& v : w.Cycle()) {
    EXPECT_EQ(v.counts.invalidations, 1u);
    EXPECT_EQ(v.counts.slow_cycles, 1u);
    EXPECT_EQ(v.batches, std::vector<std::string>{"a"});
    EXPECT_TRUE(v.errors.empty());
  }
}

TEST(Negotiator, AStoppingRankStopsEveryRankNamingIt) {
  World w(3);
  for (const CycleView& v : w.Cycle({2})) EXPECT_TRUE(v.stop);
  std::vector<std::string> said(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] { said[r] = w.negotiator(r).StoppingRanks(r == 2); });
  }
  for (auto& t : threads) t.join();
  for (const std::string& s : said) EXPECT_EQ(s, "rank 2 shut its Session down");
}

TEST(Negotiator, AControlPlaneFailureFailsTheCycleOnEveryRank) {
  World w(3);
  for (int r = 0; r < 3; ++r) w.Submit(r, Allreduce("a", 4));
  w.fake().FailNextCall(UnavailableError("rank 1 was lost"));
  for (const CycleView& v : w.Cycle()) {
    EXPECT_EQ(v.status.code(), StatusCode::kUnavailable);
    EXPECT_NE(v.status.message().find("rank 1 was lost"), std::string::npos);
  }
}

TEST(Negotiator, AJoinedRankStandsInForAllreducesUntilEveryRankJoined) {
  World w(2);
  RequestMeta join;
  join.name = "join";
  join.op = OpType::kJoin;  // (as Session::JoinAsync submits it)
  join.dtype = DataType::kUInt8;
  join.shape = {0};
  join.cacheable = false;
  w.Submit(1, join);
  w.Submit(0, Allreduce("a", 4));
  const auto views = w.Cycle();
  for (const CycleView& v : views) {
    EXPECT_EQ(v.joins, std::vector<std::string>{"1:0"});
    EXPECT_EQ(v.batches, std::vector<std::string>{"a"});
  }
  EXPECT_TRUE(views[0].placeholders.empty());
  EXPECT_EQ(views[1].placeholders, std::vector<std::string>{"a"});
  // Cached now: rank 1, still joined, marks it ready everywhere.
  w.Submit(0, Allreduce("a", 4));
  for (const CycleView& v : w.Cycle()) EXPECT_EQ(v.batches, std::vector<std::string>{"a"});
  w.Submit(0, join);
  for (const CycleView& v : w.Cycle()) EXPECT_EQ(v.joins, std::vector<std::string>{"0:1"});
  EXPECT_EQ(w.taken(0), 0u);
  EXPECT_EQ(w.taken(1), 0u);
}

}  // namespace
}  // namespace hora

namespace hora {
namespace {

// The fake itself: a rank whose peers never make the same call is told
// which, instead of waiting for ever.
TEST(FakeControlWorld, ACallThatSomeRanksNeverMakeFailsNamingThem) {
  FakeControlWorld world(4);
  world.set_timeout(std::chrono::milliseconds(100));
  std::vector<Status> got(4);
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    std::vector<uint64_t> words{~uint64_t{0}};
    got[2] = world.plane(2).And(words);
  });
  threads.front().join();
  EXPECT_EQ(got[2].code(), StatusCode::kTimeout) << got[2].ToString();
  EXPECT_NE(got[2].message().find("rank 2 waited 0.1 s for rank(s) 0, 1, 3 "), std::string::npos)
      << got[2].ToString();
  // Withdrawn: all four meet in the next call.
  threads.clear();
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      std::vector<uint64_t> words{~uint64_t{0} ^ (uint64_t{1} << r)};
      got[static_cast<size_t>(r)] = world.plane(r).And(words);
      if (words[0] != (~uint64_t{0} ^ 0xf)) got[static_cast<size_t>(r)] = InternalError("bad AND");
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& st : got) EXPECT_TRUE(st.ok()) << st.ToString();
}

}  // namespace
}  // namespace hora
