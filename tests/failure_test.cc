// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Nothing hangs: a rank that never arrives, or ranks that disagree on sizes,
// produce errors on every waiting rank within the timeout, naming the rank
// and the operation, and the Session stays usable.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "collectives/selector.h"
#include "support/thread_ranks.h"

namespace hora::testing {
namespace {

using std::chrono::steady_clock;

TEST(Failure, MissingRankTimesOutNamingRankAndOperation) {
  for (const AllreduceAlgorithm& algo : kAllAllreduceAlgorithms) {
    const int n = 4;
    ThreadRanks job(n,
                    TestSettings({{"HORA_TIMEOUT_S", "0.3"}, {"HORA_ALLREDUCE_ALGO", algo.name}}));
    std::vector<std::vector<float>> data(n, std::vector<float>(1000, 1.0f));
    const auto start = steady_clock::now();
    auto st = job.Run(
        [&](int r, Session& s) {
          auto v = TensorView::Flat(data[static_cast<size_t>(r)].data(), DataType::kFloat32, 1000);
          return s.Allreduce(v, v, {ReduceOp::kSum});
        },
        [&](int r) { return r != 2; });  // rank 2 never calls
    const double secs = std::chrono::duration<double>(steady_clock::now() - start).count();
    EXPECT_LT(secs, 5.0) << "waited far past the 0.3 s timeout";
    int timed_out = 0;
    for (int r = 0; r < n; ++r) {
      if (r == 2) continue;
      const Status& s = st[static_cast<size_t>(r)];
      ASSERT_FALSE(s.ok()) << algo.name << " rank " << r;
      EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
      EXPECT_NE(s.message().find("rank " + std::to_string(r) + ": allreduce (" + algo.name + ")"),
                std::string::npos)
          << s.message();
      EXPECT_NE(s.message().find("HORA_TIMEOUT_S"), std::string::npos) << s.message();
      if (s.message().find("from rank 2") != std::string::npos ||
          s.message().find("to rank 2") != std::string::npos ||
          s.message().find("waiting for rank 2 ") != std::string::npos) {
        ++timed_out;
      }
    }
    EXPECT_GE(timed_out, 1) << "no rank named the missing rank 2";
  }
}

TEST(Failure, SizeMismatchFailsEveryRankAndSessionRecovers) {
  for (const char* algo : {"recursive_doubling", "shared_memory"}) {
    SCOPED_TRACE(algo);
    const int n = 3;
    ThreadRanks job(n, TestSettings({{"HORA_TIMEOUT_S", "0.5"}, {"HORA_ALLREDUCE_ALGO", algo}}));
    std::vector<std::vector<int32_t>> data(n, std::vector<int32_t>(100, 1));
    auto st = job.Run([&](int r, Session& s) {
      auto v = TensorView::Flat(data[static_cast<size_t>(r)].data(), DataType::kInt32,
                                r == 1 ? 99 : 100);
      return s.Allreduce(v, v, {ReduceOp::kSum});
    });
    bool named_sizes = false;
    for (const Status& s : st) {
      EXPECT_FALSE(s.ok());
      if (s.message().find("expected 396 bytes") != std::string::npos ||
          s.message().find("expected 400 bytes") != std::string::npos ||
          (s.message().find("allreduce of 99 int32 (396 bytes)") != std::string::npos &&
           s.message().find("allreduce of 100 int32 (400 bytes)") != std::string::npos)) {
        named_sizes = true;
      }
    }
    EXPECT_TRUE(named_sizes) << st[0].message() << " | " << st[1].message();

    // The same sessions still work for a correct call.
    auto ok = job.Run([&](int r, Session& s) {
      auto v = TensorView::Flat(data[static_cast<size_t>(r)].data(), DataType::kInt32, 100);
      std::fill(data[static_cast<size_t>(r)].begin(), data[static_cast<size_t>(r)].end(), r);
      return s.Allreduce(v, v, {ReduceOp::kSum});
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(ok[static_cast<size_t>(r)].ok()) << ok[static_cast<size_t>(r)].ToString();
      EXPECT_EQ(data[static_cast<size_t>(r)][0], 0 + 1 + 2);
    }
  }
}

TEST(Failure, InvalidArgumentsAreClearErrors) {
  ThreadRanks job(2, TestSettings());
  std::vector<float> a(4), b(5);
  std::vector<uint8_t> flags(4);
  auto st = job.Run([&](int, Session& s) {
    Status e1 = s.Allreduce(TensorView::Flat(a.data(), DataType::kFloat32, 4),
                            TensorView::Flat(b.data(), DataType::kFloat32, 5));
    EXPECT_EQ(e1.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(e1.message().find("float32[5]"), std::string::npos) << e1.message();
    Status e2 =
        s.Allreduce(TensorView::Flat(flags.data(), DataType::kBool, 4),
                    TensorView::Flat(flags.data(), DataType::kBool, 4), {ReduceOp::kSum, 2.0, 1.0});
    EXPECT_EQ(e2.code(), StatusCode::kInvalidArgument);
    Status e3 = s.Broadcast(TensorView::Flat(a.data(), DataType::kFloat32, 4), 7);
    EXPECT_NE(e3.message().find("root rank 7"), std::string::npos) << e3.message();
    Status e4 = s.Allreduce(TensorView(nullptr, DataType::kFloat32, {3}),
                            TensorView(nullptr, DataType::kFloat32, {3}));
    EXPECT_NE(e4.message().find("null"), std::string::npos) << e4.message();
    std::vector<int64_t> bad_splits = {1, 1};
    auto e5 = s.Alltoall(TensorView::Flat(a.data(), DataType::kFloat32, 4), bad_splits);
    EXPECT_NE(e5.status().message().find("splits add up to 2 rows but dimension 0"),
              std::string::npos)
        << e5.status().message();
    // Enum values out of range (a cast from an int): refused, not run (a
    // bad dtype crashed the process, a bad op returned an untouched output).
    const auto bad_dtype = static_cast<DataType>(42);
    Status e6 = s.Allreduce(TensorView::Flat(a.data(), bad_dtype, 4),
                            TensorView::Flat(a.data(), bad_dtype, 4));
    EXPECT_NE(e6.message().find("unknown dtype 42"), std::string::npos) << e6.message();
    Status e7 = s.AllreduceAsync("bad_dtype", TensorView::Flat(a.data(), bad_dtype, 4),
                                 TensorView::Flat(a.data(), bad_dtype, 4))
                    .Wait(std::chrono::seconds(30));
    EXPECT_NE(e7.message().find("unknown dtype 42"), std::string::npos) << e7.message();
    const Reduction bad_op{static_cast<ReduceOp>(42)};
    Status e8 = s.Allreduce(TensorView::Flat(a.data(), DataType::kFloat32, 4),
                            TensorView::Flat(a.data(), DataType::kFloat32, 4), bad_op);
    EXPECT_NE(e8.message().find("unknown reduce op 42"), std::string::npos) << e8.message();
    Status e9 = s.AllreduceAsync("bad_op", TensorView::Flat(a.data(), DataType::kFloat32, 4),
                                 TensorView::Flat(a.data(), DataType::kFloat32, 4), bad_op)
                    .Wait(std::chrono::seconds(30));
    EXPECT_NE(e9.message().find("unknown reduce op 42"), std::string::npos) << e9.message();
    return s.Barrier();  // and the session still works
  });
  for (const Status& s : st) EXPECT_TRUE(s.ok()) << s.ToString();
}

// A call one rank refuses (its own checks fail) while the others' are
// fine: every rank's fails once all have submitted it, the refusing rank's
// with its own error, the others' naming it; named, unnamed and grouped.
// Later calls line up (an unnamed one is not shifted by one). Before, the
// others waited for good (named) or got the next call's data (unnamed).
TEST(Failure, ACallOneRankRefusesFailsOnEveryRankAndLaterCallsLineUp) {
  ThreadRanks job(2, TestSettings());
  auto st = job.Run([&](int rank, Session& s) -> Status {
    std::vector<float> in(4, static_cast<float>(rank + 1)), out(rank == 1 ? 5 : 4);
    const TensorView input = TensorView::Flat(in.data(), DataType::kFloat32, 4);
    const TensorView output = TensorView::Flat(out.data(), DataType::kFloat32, out.size());
    const auto wait = std::chrono::seconds(30);
    for (const std::string name : {"refused", ""}) {
      Status e = s.AllreduceAsync(name, input, output).Wait(wait);
      if (rank == 1) {
        EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << e.ToString();
        EXPECT_NE(e.message().find("does not match input"), std::string::npos) << e.message();
      } else {
        EXPECT_EQ(e.code(), StatusCode::kMismatch) << e.ToString();
        EXPECT_NE(e.message().find("rank 1: allreduce"), std::string::npos) << e.message();
        EXPECT_NE(e.message().find("does not match input"), std::string::npos) << e.message();
      }
    }
    std::vector<float> bad(rank == 1 ? 3 : 4);
    const std::vector<TensorView> ins = {input, input};
    const std::vector<TensorView> outs = {
        input, TensorView::Flat(bad.data(), DataType::kFloat32, bad.size())};
    for (const Handle& h : s.GroupedAllreduceAsync("refused_group", ins, outs)) {
      Status e = h.Wait(wait);
      EXPECT_EQ(e.code(), rank == 1 ? StatusCode::kInvalidArgument : StatusCode::kMismatch)
          << e.ToString();
    }
    // An unnamed group whose inputs and outputs differ in count on rank 1.
    const std::span<const TensorView> outs_given(outs.data(), rank == 1 ? 1 : 2);
    for (const Handle& h : s.GroupedAllreduceAsync("", ins, outs_given)) {
      Status e = h.Wait(wait);
      EXPECT_EQ(e.code(), rank == 1 ? StatusCode::kInvalidArgument : StatusCode::kMismatch)
          << e.ToString();
      EXPECT_NE(e.message().find("2 inputs but 1 outputs"), std::string::npos) << e.ToString();
      EXPECT_NE(e.message().find("grouped allreduce 'grouped_allreduce.noname.0': "),
                std::string::npos)
          << e.ToString();
    }
    // The next unnamed call meets its peer's (sum 1 + 2), not a shifted one.
    std::vector<float> next(4, static_cast<float>(rank + 1));
    const TensorView v = TensorView::Flat(next.data(), DataType::kFloat32, 4);
    HORA_RETURN_IF_ERROR(s.AllreduceAsync("", v, v, {ReduceOp::kSum}).Wait(wait));
    EXPECT_EQ(next, std::vector<float>(4, 3.0f));
    return s.Barrier();
  });
  for (const Status& s : st) EXPECT_TRUE(s.ok()) << s.ToString();
}

// A call a framework binding refused before handing it over
// (Session::RefuseAsync, for each kind) fails on every rank: the refusing
// rank's with its error, the others' with a MismatchError naming it;
// unnamed calls and groups take the names the calls would have, so later
// calls line up. A kind the Session does not know, or an OK status, is
// refused on this rank alone, at once.
TEST(Failure, ACallABindingRefusedFailsOnEveryRankAndLaterCallsLineUp) {
  ThreadRanks job(2, TestSettings());
  auto st = job.Run([&](int rank, Session& s) -> Status {
    const auto wait = std::chrono::seconds(30);
    std::vector<float> data(4, static_cast<float>(rank + 1));
    const TensorView v = TensorView::Flat(data.data(), DataType::kFloat32, 4);
    const Status why = InvalidArgument("allreduce 'x': dtype complex64 is not supported");
    auto check = [&](const std::vector<Handle>& hs, const std::string& kind, size_t count) {
      EXPECT_EQ(hs.size(), count) << kind;
      for (const Handle& h : hs) {
        const Status e = h.Wait(wait);
        EXPECT_EQ(e.code(), rank == 1 ? StatusCode::kInvalidArgument : StatusCode::kMismatch)
            << kind << ": " << e.ToString();
        EXPECT_NE(e.message().find("rank 1: allreduce 'x': dtype complex64"), std::string::npos)
            << kind << ": " << e.ToString();
      }
    };
    for (const std::string name : {"refused", ""}) {
      auto refuse = [&](std::string_view kind, size_t n = 0) {
        return s.RefuseAsync(kind, name, why, n);
      };
      check(rank == 1 ? refuse("allreduce") : std::vector<Handle>{s.AllreduceAsync(name, v, v)},
            "allreduce", 1);
      // (Each fails, and a failed call is not cached: the name may come again.)
      check(rank == 1 ? refuse("broadcast") : std::vector<Handle>{s.BroadcastAsync(name, v, 0)},
            "broadcast", 1);
      check(rank == 1 ? refuse("allgather") : std::vector<Handle>{s.AllgatherAsync(name, v)},
            "allgather", 1);
      check(
          rank == 1 ? refuse("reducescatter") : std::vector<Handle>{s.ReducescatterAsync(name, v)},
          "reducescatter", 1);
      check(rank == 1 ? refuse("alltoall") : std::vector<Handle>{s.AlltoallAsync(name, v)},
            "alltoall", 1);
      const std::vector<TensorView> group = {v, v, v};
      check(
          rank == 1 ? refuse("grouped_allreduce", 3) : s.GroupedAllreduceAsync(name, group, group),
          "grouped_allreduce", 3);
      check(rank == 1 ? refuse("grouped_allgather", 3) : s.GroupedAllgatherAsync(name, group),
            "grouped_allgather", 3);
      check(
          rank == 1 ? refuse("grouped_reducescatter", 3) : s.GroupedReducescatterAsync(name, group),
          "grouped_reducescatter", 3);
    }
    // Refused here alone, at once: no such kind, no error.
    for (const auto& [kind, error] :
         {std::pair<std::string_view, Status>{"allredux", why}, {"allreduce", Status::Ok()}}) {
      const std::vector<Handle> hs = s.RefuseAsync(kind, "local", error);
      EXPECT_EQ(hs.size(), 1u);
      const Status e = hs[0].Wait(std::chrono::seconds(0));
      EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << e.ToString();
      EXPECT_NE(e.message().find(error.ok() ? "a refusal needs an error"
                                            : "no collective is called 'allredux'"),
                std::string::npos)
          << e.ToString();
    }
    // The next unnamed calls meet their peer's (sum 1 + 2), not shifted ones.
    HORA_RETURN_IF_ERROR(s.AllreduceAsync("", v, v, {ReduceOp::kSum}).Wait(wait));
    EXPECT_EQ(data, std::vector<float>(4, 3.0f));
    const std::vector<TensorView> group = {v, v};
    for (const Handle& h : s.GroupedAllreduceAsync("", group, group, {ReduceOp::kMax}))
      HORA_RETURN_IF_ERROR(h.Wait(wait));
    EXPECT_EQ(data, std::vector<float>(4, 3.0f));
    return s.Barrier();
  });
  for (const Status& s : st) EXPECT_TRUE(s.ok()) << s.ToString();
}

// A second Session for a rank of a ThreadWorld while its first lives is
// refused (it made a second endpoint for the rank, and the process hung);
// once the first is gone, the rank may have another.
TEST(Failure, ASecondSessionForOneRankOfAThreadWorldIsRefused) {
  auto world = ThreadWorld::Create(1);
  SessionOptions options;
  options.world = world;
  options.rank = 0;
  options.read_environment = false;
  auto first = Session::Create(options);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = Session::Create(options);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("rank 0 has a Session in this ThreadWorld already"),
            std::string::npos)
      << second.status().ToString();
  first->reset();
  auto again = Session::Create(options);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE((*again)->Barrier().ok());
  // A world of no rank (it was taken as a world of one).
  for (int size : {0, -3}) {
    options.world = ThreadWorld::Create(size);
    auto none = Session::Create(options);
    ASSERT_FALSE(none.ok()) << size;
    EXPECT_NE(none.status().message().find("a world needs one rank or more"), std::string::npos)
        << none.status().ToString();
  }
}

// A blocking allreduce whose output one rank gives wrong: that rank takes
// part into memory of its own and returns its error; the others' complete
// with the right sums, and the next calls line up (each was shifted by one
// before: an audit found every later result wrong).
TEST(Failure, ABlockingAllreduceWithABadOutputOnOneRankKeepsTheRanksInStep) {
  ThreadRanks job(2, TestSettings());
  auto st = job.Run([&](int rank, Session& s) -> Status {
    for (int step = 0; step < 3; ++step) {
      std::vector<float> in(4, static_cast<float>(100 * step + 10 * rank));
      std::vector<int32_t> wrong(4);
      const TensorView v = TensorView::Flat(in.data(), DataType::kFloat32, 4);
      Status e = step == 1 && rank == 1
                     ? s.Allreduce(v, TensorView::Flat(wrong.data(), DataType::kInt32, 4))
                     : s.Allreduce(v, v);
      if (step == 1 && rank == 1) {
        EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << e.ToString();
        continue;
      }
      HORA_RETURN_IF_ERROR(e);
      EXPECT_EQ(in, std::vector<float>(4, static_cast<float>(200 * step + 10))) << step;
    }
    return s.Barrier();
  });
  for (const Status& s : st) EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(Failure, InvalidSettingNamesVariableValueAndAccepted) {
  auto world = ThreadWorld::Create(1);
  struct Case {
    const char* name;
    const char* value;
    const char* expect;
  } cases[] = {
      {"HORA_TIMEOUT_S", "-3", "expected a number, 0 or greater and at most 1e+08"},
      {"HORA_TIMEOUT_S", "1e12",
       "HORA_TIMEOUT_S='1e12' is invalid: expected a number, 0 or "
       "greater and at most 1e+08"},
      {"HORA_PEER_TIMEOUT_S", "inf", "HORA_PEER_TIMEOUT_S='inf'"},
      {"HORA_START_TIMEOUT_S", "0", "expected a number greater than 0 and at most 1e+08"},
      {"HORA_TIMEOUT_S", "soon", "HORA_TIMEOUT_S='soon'"},
      {"HORA_LOG_LEVEL", "loud", "one of trace, debug, info, warning, error (Horovod"},
      {"HORA_RING_SEGMENT_BYTES", "12Q", "such as 65536, 64K"},
      {"HORA_ALLREDUCE_ALGO", "bogus", "unknown algorithm 'bogus'"},
      {"HORA_ALLREDUCE_ALGO", "ring:64K", "has no '-'"},
      {"HORA_BROADCAST_ALGO", "tree:1M-4K", "empty range"},
  };
  for (const Case& c : cases) {
    SessionOptions o;
    o.rank = 0;
    o.world = world;
    o.read_environment = false;
    o.settings = {{c.name, c.value}};
    auto s = Session::Create(o);
    ASSERT_FALSE(s.ok()) << c.name << "=" << c.value;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(c.name), std::string::npos) << s.status().message();
    EXPECT_NE(s.status().message().find(c.expect), std::string::npos) << s.status().message();
  }
}

// A rank of a ThreadWorld that never makes its Session is taken for one that
// never came, after HORA_START_TIMEOUT_S from the rank waiting for it (as a
// process that never came fails the rendezvous): what waits for it fails
// naming it, and the waiting rank's Session then ends. Before, it waited
// with stall warnings for good, its destructor too.
TEST(Failure, AThreadWorldRankThatMakesNoSessionFailsItsPeersAfterTheStartTimeout) {
  auto world = ThreadWorld::Create(3);
  SessionOptions options;
  options.world = world;
  options.rank = 0;
  options.read_environment = false;
  options.settings = {{"HORA_START_TIMEOUT_S", "1"}};
  auto s = Session::Create(options);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  float x = 1.0f;
  const TensorView v = TensorView::Flat(&x, DataType::kFloat32, 1);
  Handle pending = (*s)->AllreduceAsync("waits", v, v);
  const Status st = pending.Wait(std::chrono::seconds(20));
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("rank 1 of this ThreadWorld made no Session within 1 s "
                              "(HORA_START_TIMEOUT_S) of rank 0's"),
            std::string::npos)
      << st.ToString();
  const auto start = steady_clock::now();
  s->reset();
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(20));
}

// A rank that comes within the bound is waited for: the others' waits do
// not fail meanwhile (the bound counts from each rank's own start).
TEST(Failure, AThreadWorldRankThatComesLateWithinTheStartTimeoutIsWaitedFor) {
  auto world = ThreadWorld::Create(2);
  auto make = [&](int rank) {
    SessionOptions options;
    options.world = world;
    options.rank = rank;
    options.read_environment = false;
    options.settings = {{"HORA_START_TIMEOUT_S", "30"}};
    return Session::Create(options);
  };
  auto s0 = make(0);
  ASSERT_TRUE(s0.ok()) << s0.status().ToString();
  float x0 = 1.0f, x1 = 2.0f;
  Handle h0 = (*s0)->AllreduceAsync("late", TensorView::Flat(&x0, DataType::kFloat32, 1),
                                    TensorView::Flat(&x0, DataType::kFloat32, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_FALSE(h0.Poll());
  auto s1 = make(1);
  ASSERT_TRUE(s1.ok()) << s1.status().ToString();
  Handle h1 = (*s1)->AllreduceAsync("late", TensorView::Flat(&x1, DataType::kFloat32, 1),
                                    TensorView::Flat(&x1, DataType::kFloat32, 1));
  EXPECT_TRUE(h0.Wait(std::chrono::seconds(20)).ok());
  EXPECT_TRUE(h1.Wait(std::chrono::seconds(20)).ok());
  EXPECT_EQ(x0, 3.0f);
  EXPECT_EQ(x1, 3.0f);
}

}  // namespace
}  // namespace hora::testing
