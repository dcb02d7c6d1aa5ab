// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The SharedWindow contract (shared_window.h) on both transports that offer
// one, ranks as threads: data written before a step is seen by every rank
// after it, words travel with steps, a missing rank times out naming it and
// leaves the window broken, a closed rank fails the others at once, and the
// *_shared collectives' first step turns a size disagreement into the same
// Mismatch on every rank while the window stays usable; a broadcast on it
// from every root, and ranks that disagree on its root (reduce-scatter and
// allgather on it: shared_window_collectives_test.cc); the engine's AND
// carries an allreduce only where every rank agrees.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/bitwise_and.h"
#include "collectives/shared_common.h"
#include "store/memory_store.h"
#include "support/shm_test_util.h"
#include "support/window_groups.h"
#include "transport/loopback/loopback_transport.h"

namespace hora {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::OnRanks;

class SharedWindowTest : public testing::WindowGroupTest {};

TEST_P(SharedWindowTest, OnlyTheGlobalContextsHaveWindowsOfTheStatedSize) {
  auto ts = Group(2);
  ASSERT_EQ(ts.size(), 2u);
  for (uint32_t c = 0; c < kSharedWindowContexts; ++c) {
    SharedWindow* w = ts[0]->Window(c);
    ASSERT_NE(w, nullptr) << "context " << c;
    EXPECT_EQ(w->bytes(), SharedWindowBytes(c));
    EXPECT_EQ(w, ts[0]->Window(c)) << "the same object on every call";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(w->local()) % 64, 0u);
  }
  EXPECT_EQ(ts[0]->Window(kSharedWindowContexts), nullptr);
}

TEST_P(SharedWindowTest, WritesBeforeAStepAreSeenByEveryRankAfterIt) {
  const int n = 4;
  auto ts = Group(n);
  const int rounds = 200;
  auto st = OnRanks(ts, [&](int r, Transport& t) -> Status {
    SharedWindow& w = *t.Window(1);
    for (int round = 0; round < rounds; ++round) {
      const size_t half = w.NextHalf() * (w.bytes() / 2);
      // Fill a stretch spanning several pages, so that stale data shows.
      auto* mine = reinterpret_cast<uint32_t*>(w.local() + half);
      for (size_t i = 0; i < 5000; ++i) mine[i] = static_cast<uint32_t>(round * 1000 + r * 7 + i);
      HORA_RETURN_IF_ERROR(
          w.Step(static_cast<uint64_t>(round * 16 + r), Clock::now() + seconds(60)));
      for (int k = 0; k < n; ++k) {
        if (w.word(k) != static_cast<uint64_t>(round * 16 + k)) {
          return InternalError("rank " + std::to_string(r) + " round " + std::to_string(round) +
                               ": word of rank " + std::to_string(k) + " is " +
                               std::to_string(w.word(k)));
        }
        const auto* theirs = reinterpret_cast<const uint32_t*>(w.region(k) + half);
        for (size_t i = 0; i < 5000; i += 97) {
          if (theirs[i] != static_cast<uint32_t>(round * 1000 + k * 7 + i)) {
            return InternalError("rank " + std::to_string(r) + " round " + std::to_string(round) +
                                 ": stale data from rank " + std::to_string(k));
          }
        }
      }
    }
    return Status::Ok();
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(st[r].ok()) << st[r].ToString();
}

// Only a step's last arrival wakes the ranks asleep in it (an earlier one
// would wake them only to find the step still open): it must still wake
// every one of them at once, whichever rank it is.
TEST_P(SharedWindowTest, TheLastArrivalWakesTheRanksAsleepInTheStep) {
  const int n = 3;
  const int rounds = 120;
  auto ts = Group(n, Duration::zero());  // (shm) waiters sleep at once
  // A sleeper looks again by itself after this long at most (shm: 50 ms,
  // loopback: 10 ms), so one not woken wakes most of that after the last
  // arrival. Woken, it takes microseconds; a loaded machine delays some
  // wake-ups by milliseconds, but not the median.
  const Duration late_after = (shm() ? kShmMaxSleep : Duration(milliseconds(10))) / 2;
  std::atomic<int64_t> last_arrival{0};  // Clock ticks
  std::mutex mu;
  std::vector<int64_t> delays;  // after each round's last arrival, in ticks
  auto st = OnRanks(ts, [&](int r, Transport& t) -> Status {
    SharedWindow& w = *t.Window(1);
    for (int round = 0; round < rounds; ++round) {
      // Each round another rank comes last, once the others are asleep.
      const bool last = round % n == r;
      if (last) {
        std::this_thread::sleep_for(milliseconds(2));
        last_arrival.store(Clock::now().time_since_epoch().count());
      }
      HORA_RETURN_IF_ERROR(w.Step(static_cast<uint64_t>(round), Clock::now() + seconds(60)));
      if (last) continue;
      // (the step orders this round's store before this load)
      const int64_t after = Clock::now().time_since_epoch().count() - last_arrival.load();
      std::lock_guard<std::mutex> lock(mu);
      delays.push_back(after);
    }
    return Status::Ok();
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(st[r].ok()) << st[r].ToString();
  ASSERT_EQ(delays.size(), static_cast<size_t>(rounds * (n - 1)));
  std::sort(delays.begin(), delays.end());
  const Duration median(delays[delays.size() / 2]);
  // Without the wake-up the median is most of a sleep (about 8 ms on
  // loopback, 48 ms on shm).
  EXPECT_LT(median, late_after) << "median " << DurationToSeconds(median) * 1e3 << " ms, worst "
                                << DurationToSeconds(Duration(delays.back())) * 1e3 << " ms";
}

TEST_P(SharedWindowTest, AMissingRankTimesOutNamedAndTheWindowStaysBroken) {
  const int n = 3;
  auto ts = Group(n);
  auto st = OnRanks(ts, [&](int r, Transport& t) -> Status {
    if (r == 2) return Status::Ok();  // never steps
    SharedWindow& w = *t.Window(0);
    const auto start = Clock::now();
    Status first = w.Step(1, Clock::now() + milliseconds(200));
    if (first.code() != StatusCode::kTimeout)
      return InternalError("want a timeout: " + first.ToString());
    if (first.message().find("waiting for rank 2 ") == std::string::npos) {
      return InternalError("does not name rank 2: " + first.message());
    }
    if (Clock::now() - start > seconds(5)) return InternalError("waited far past the deadline");
    EXPECT_TRUE(w.broken());
    Status later = w.Step(2, Clock::now() + seconds(60));
    if (later.code() != StatusCode::kUnavailable ||
        later.message().find("earlier failure") == std::string::npos) {
      return InternalError("a later step should fail at once: " + later.ToString());
    }
    return Status::Ok();
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
}

TEST_P(SharedWindowTest, ARankThatClosesFailsTheOthersAtOnce) {
  const int n = 3;
  auto ts = Group(n);
  ts[1].reset();  // rank 1's session ended
  auto alive = [&](int r) { return r != 1; };
  std::vector<Status> st(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    if (!alive(r)) continue;
    threads.emplace_back([&, r] {
      const auto start = Clock::now();
      st[r] = ts[r]->Window(1)->Step(7, Clock::now() + seconds(60));
      if (Clock::now() - start > seconds(10)) ADD_FAILURE() << "rank " << r << " waited for long";
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    if (!alive(r)) continue;
    EXPECT_EQ(st[r].code(), StatusCode::kUnavailable) << st[r].ToString();
    EXPECT_NE(st[r].message().find("rank 1 closed"), std::string::npos) << st[r].message();
  }
}

TEST_P(SharedWindowTest, DisagreeingSizesFailAlikeAndTheWindowGoesOn) {
  const int n = 3;
  auto ts = Group(n);
  auto st = OnRanks(ts, [&](int r, Transport& t) -> Status {
    Comm comm(t, WaitPolicy{seconds(60)}, 256 << 10, 1);
    std::vector<float> data(100, static_cast<float>(r));
    Status bad = AllreduceShared(
        comm,
        {data.data(), data.data(), r == 1 ? size_t{99} : size_t{100}, DataType::kFloat32, {}});
    if (bad.code() != StatusCode::kMismatch ||
        bad.message().find("rank 1: allreduce of 99 float32 (396 bytes)") == std::string::npos ||
        bad.message().find("rank 0: allreduce of 100 float32 (400 bytes)") == std::string::npos) {
      return InternalError("want a Mismatch naming both sizes: " + bad.ToString());
    }
    Status other =
        r == 0 ? BarrierShared(comm)
               : AllreduceShared(comm, {data.data(), data.data(), 100, DataType::kFloat32, {}});
    if (other.code() != StatusCode::kMismatch ||
        other.message().find("rank 0: barrier") == std::string::npos) {
      return InternalError("want a Mismatch naming the barrier: " + other.ToString());
    }
    // Fresh values each time: stale data from a drifted half would show.
    for (int round = 1; round <= 4; ++round) {
      std::fill(data.begin(), data.end(), static_cast<float>(r + 10 * round));
      HORA_RETURN_IF_ERROR(
          AllreduceShared(comm, {data.data(), data.data(), 100, DataType::kFloat32, {}}));
      for (float v : data) {
        if (v != 0 + 1 + 2 + 30 * round) return InternalError("wrong sum " + std::to_string(v));
      }
      HORA_RETURN_IF_ERROR(BarrierShared(comm));
    }
    return Status::Ok();
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
}

// A broadcast on the window (BroadcastShared) from every root, of sizes
// from nothing to many chunks (256 KiB each), odd ones too,
// each byte checked against the root's; allreduces between them keep the
// halves alternating as they would in a job.
TEST_P(SharedWindowTest, BroadcastsFromEveryRootAcrossChunks) {
  for (int n : {2, 3, 5}) {
    auto ts = Group(n);
    auto st = OnRanks(ts, [&](int r, Transport& t) -> Status {
      Comm comm(t, WaitPolicy{seconds(60)}, 256 << 10, 1);
      auto byte = [](int root, size_t i, size_t bytes) {
        return static_cast<uint8_t>(root * 31 + i * 7 + (i >> 9) + bytes);
      };
      for (size_t bytes :
           {size_t{0}, size_t{1}, size_t{4093}, (size_t{1} << 20) + 7, (size_t{3} << 20) + 1}) {
        for (int root = 0; root < n; ++root) {
          std::vector<uint8_t> data(bytes, 0xEE);
          if (r == root) {
            for (size_t i = 0; i < bytes; ++i) data[i] = byte(root, i, bytes);
          }
          HORA_RETURN_IF_ERROR(BroadcastShared(comm, data.data(), bytes, root));
          for (size_t i = 0; i < bytes; ++i) {
            if (data[i] != byte(root, i, bytes)) {
              return InternalError("broadcast of " + std::to_string(bytes) + " from " +
                                   std::to_string(root) + ": byte " + std::to_string(i) + " wrong");
            }
          }
          float v = 1.0f;
          HORA_RETURN_IF_ERROR(AllreduceShared(comm, {&v, &v, 1, DataType::kFloat32, {}}));
          if (v != static_cast<float>(n)) return InternalError("allreduce between broadcasts");
        }
      }
      return Status::Ok();
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(st[r].ok()) << "np " << n << " rank " << r << ": " << st[r].ToString();
    }
  }
}

// Ranks that name different roots, or sizes, fail alike with a Mismatch
// naming each rank's call, and the window goes on.
TEST_P(SharedWindowTest, BroadcastsThatDisagreeFailAlikeAndTheWindowGoesOn) {
  const int n = 3;
  auto ts = Group(n);
  auto st = OnRanks(ts, [&](int r, Transport& t) -> Status {
    Comm comm(t, WaitPolicy{seconds(60)}, 256 << 10, 1);
    std::vector<uint8_t> data(100, static_cast<uint8_t>(r));
    Status roots = BroadcastShared(comm, data.data(), 100, r == 2 ? 1 : 0);
    if (roots.code() != StatusCode::kMismatch ||
        roots.message().find("rank 2: broadcast of 100 bytes from rank 1") == std::string::npos ||
        roots.message().find("rank 0: broadcast of 100 bytes from rank 0") == std::string::npos) {
      return InternalError("want a Mismatch naming both roots: " + roots.ToString());
    }
    Status sizes = BroadcastShared(comm, data.data(), r == 1 ? 99 : 100, 0);
    if (sizes.code() != StatusCode::kMismatch ||
        sizes.message().find("rank 1: broadcast of 99 bytes") == std::string::npos) {
      return InternalError("want a Mismatch naming both sizes: " + sizes.ToString());
    }
    Status outside = BroadcastShared(comm, data.data(), 100, 3);
    if (outside.code() != StatusCode::kInvalidArgument ||
        outside.message().find("root rank 3 is outside the world of 3") == std::string::npos) {
      return InternalError("want the root named: " + outside.ToString());
    }
    for (int round = 1; round <= 3; ++round) {
      std::fill(data.begin(), data.end(), static_cast<uint8_t>(r + 10 * round));
      HORA_RETURN_IF_ERROR(BroadcastShared(comm, data.data(), data.size(), 2));
      for (uint8_t v : data) {
        if (v != 2 + 10 * round) return InternalError("wrong value " + std::to_string(v));
      }
    }
    return Status::Ok();
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
}

// The engine's fused path: tensors of odd sizes (empty ones too) reduced
// where they are, spanning several window chunks or all in one small one,
// with scale factors, in place and not, on 2 to 4 ranks; each element
// checked against its own sum. Without a prescale a rank reads its own
// piece of a two-step chunk from its input, not from a copy in the window
// (SharedOwnPiece): where that piece spans parts, and for each rank's piece.
TEST_P(SharedWindowTest, PartsAreReducedInPlaceAcrossChunks) {
  // Two-step chunks; one small chunk of several parts (reduced whole, then
  // copied out); one small part alone (reduced where it goes); a two-step
  // chunk of many small parts, so every rank's piece spans several; a
  // message of over 4 MiB, whose outputs out of place are streamed.
  const std::vector<std::vector<size_t>> cases = {{0, 1, 7, 300000, 0, 262144 + 5, 13},
                                                  {0, 1, 7, 5, 0, 1000, 13},
                                                  {0, 3, 0},
                                                  std::vector<size_t>(40, 997),
                                                  {3, 1100001, 7, 300001}};
  for (const int n : {2, 3, 4}) {
    auto ts = Group(n);
    for (const auto& counts : cases)
      for (const Reduction red :
           {Reduction{ReduceOp::kSum, 1.0, 1.0}, Reduction{ReduceOp::kAverage, 0.5, 4.0},
            Reduction{ReduceOp::kMax, 1.0, 1.0}}) {
        auto st = OnRanks(ts, [&](int r, Transport& t) -> Status {
          Comm comm(t, WaitPolicy{seconds(60)}, 256 << 10, 1);
          std::vector<std::vector<float>> in(counts.size()), out(counts.size());
          std::vector<AllreducePart> parts;
          for (size_t i = 0; i < counts.size(); ++i) {
            in[i].resize(counts[i]);
            for (size_t e = 0; e < counts[i]; ++e) in[i][e] = static_cast<float>((e + i + r) % 11);
            const bool in_place = i % 2 == 0;
            if (!in_place) out[i].assign(counts[i], -1.0f);
            parts.push_back({in[i].data(), in_place ? in[i].data() : out[i].data(), counts[i]});
          }
          HORA_RETURN_IF_ERROR(AllreducePartsShared(comm, parts, DataType::kFloat32, red));
          for (size_t i = 0; i < counts.size(); ++i) {
            const float* got = static_cast<const float*>(parts[i].out);
            for (size_t e = 0; e < counts[i]; ++e) {
              float want = 0;
              for (int k = 0; k < n; ++k) {
                const float v = static_cast<float>((e + i + k) % 11);
                const float pre = v * static_cast<float>(red.prescale_factor);
                want = red.op == ReduceOp::kMax ? std::max(want, pre) : want + pre;
              }
              if (red.op == ReduceOp::kAverage) want /= n;
              want *= static_cast<float>(red.postscale_factor);
              if (got[e] != want) {
                return InternalError("rank " + std::to_string(r) + " part " + std::to_string(i) +
                                     " element " + std::to_string(e) + ": " +
                                     std::to_string(got[e]) + " != " + std::to_string(want));
              }
            }
          }
          return Status::Ok();
        });
        for (int r = 0; r < n; ++r)
          EXPECT_TRUE(st[r].ok()) << n << " ranks, rank " << r << ": " << st[r].ToString();
      }
  }
}

// The engine's bit-vector AND carrying a cached allreduce (collectives/bitwise_and.h):
// run only when every rank carries the same allreduce and the same bits
// (status word aside); otherwise no output is written. The AND is right
// either way. One-step (small) and two-step sizes, scale factors, in place
// and not; the AND on the control context's window, the data on the data
// context's, which goes on right afterwards whether the allreduce ran or not.
TEST_P(SharedWindowTest, TheBitVectorCarriesAnAllreduceOnlyWhereEveryRankAgrees) {
  const int n = 3;
  auto ts = Group(n);
  struct Case {
    const char* what;
    std::vector<size_t> counts;
    int odd_rank;  // -1: none; else this rank differs as `how` says
    enum { kNothing, kBits, kStatus, kNoData, kScale } how;
    bool runs;
  };
  const Case cases[] = {
      {"agreeing, one step", {1, 7, 0, 13}, -1, Case::kNothing, true},
      {"agreeing, two steps", {1, 5000, 7}, -1, Case::kNothing, true},
      {"status words differ", {1, 5000, 7}, 2, Case::kStatus, true},
      {"a ready bit differs", {1, 5000, 7}, 1, Case::kBits, false},
      {"a rank carries nothing", {3, 9}, 2, Case::kNoData, false},
      {"a prescale differs", {3, 9}, 0, Case::kScale, false},
      {"too large for half the data window", {300000}, -1, Case::kNothing, false},
  };
  for (const Case& c : cases) {
    const Reduction red{ReduceOp::kAverage, 0.5, 4.0};
    std::vector<uint8_t> ran(static_cast<size_t>(n),
                             0);  // (not vector<bool>: ranks write it at once)
    auto st = OnRanks(ts, [&](int r, Transport& t) -> Status {
      Comm comm(t, WaitPolicy{seconds(60)}, 256 << 10, 2);
      Comm data(t, WaitPolicy{seconds(60)}, 256 << 10, 1);
      const bool odd = r == c.odd_rank;
      // Two ready words, two valid words, a status word.
      std::vector<uint64_t> words = {0xf0f0ull, 1, ~0ull, ~0ull, 0xfull};
      if (odd && c.how == Case::kBits) words[1] |= 2;
      if (odd && c.how == Case::kStatus) words[4] = 0x5;
      std::vector<std::vector<float>> in(c.counts.size()), out(c.counts.size());
      std::vector<AllreducePart> parts;
      for (size_t i = 0; i < c.counts.size(); ++i) {
        in[i].resize(c.counts[i]);
        for (size_t e = 0; e < c.counts[i]; ++e) in[i][e] = static_cast<float>((e + i + r) % 11);
        out[i].assign(c.counts[i], -1.0f);
        parts.push_back({in[i].data(), i % 2 == 0 ? in[i].data() : out[i].data(), c.counts[i]});
      }
      Reduction mine = red;
      if (odd && c.how == Case::kScale) mine.prescale_factor = 2.0;
      const CarriedAllreduce carried{parts, DataType::kFloat32, mine};
      HORA_ASSIGN_OR_RETURN(
          bool done, AllreduceBitwiseAndCarrying(
                         comm, words, &data, odd && c.how == Case::kNoData ? nullptr : &carried));
      ran[static_cast<size_t>(r)] = done;
      const std::vector<uint64_t> want_words = {0xf0f0ull, 1, ~0ull, ~0ull,
                                                c.how == Case::kStatus ? 0x5ull : 0xfull};
      if (words != want_words) return InternalError("wrong AND");
      for (size_t i = 0; i < c.counts.size(); ++i) {
        const float* got = static_cast<const float*>(parts[i].out);
        for (size_t e = 0; e < c.counts[i]; ++e) {
          float want = 0;
          for (int k = 0; k < n; ++k) want += static_cast<float>((e + i + k) % 11) * 0.5f;
          want = want / n * 4.0f;
          if (!done) want = i % 2 == 0 ? static_cast<float>((e + i + r) % 11) : -1.0f;
          if (got[e] != want) {
            return InternalError("part " + std::to_string(i) + " element " + std::to_string(e) +
                                 ": " + std::to_string(got[e]) + " != " + std::to_string(want));
          }
        }
      }
      // The data Comm's own collectives go on in step (its window's halves
      // and steps agree on every rank): a shared allreduce of two sizes.
      for (size_t count : {size_t{5}, size_t{9000}}) {
        std::vector<float> v(count, static_cast<float>(r + 1));
        HORA_RETURN_IF_ERROR(AllreduceShared(
            data, {v.data(), v.data(), count, DataType::kFloat32, {ReduceOp::kSum}}));
        for (float x : v) {
          if (x != static_cast<float>(n * (n + 1) / 2)) {
            return InternalError("the data Comm's allreduce after: " + std::to_string(x));
          }
        }
      }
      return Status::Ok();
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(st[r].ok()) << c.what << ", rank " << r << ": " << st[r].ToString();
      EXPECT_EQ(ran[static_cast<size_t>(r)] != 0, c.runs) << c.what << ", rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, SharedWindowTest, ::testing::Values("loopback", "shm"),
                         testing::TransportName);

}  // namespace
}  // namespace hora
