// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The host NCCL's meeting served to other processes (host_nccl_remote.h),
// here through its socket from threads of this process (the multi-process
// tests, mp_device_nccl_*, run it between processes): rank 0 meets at the
// Hub itself, the others through the server. Every rank gets every rank's
// bytes in each round; sends are received in order; a rank's end ends only
// its wait; the serving side's end fails the others' waits, saying so; and
// a call whose server is gone waits until its rank ends.
#include "doubles/host_nccl_remote.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace hora::host_nccl {
namespace {

using namespace std::chrono_literals;

std::vector<std::byte> BytesOf(int rank, size_t n) {
  std::vector<std::byte> b(n);
  for (size_t k = 0; k < n; ++k) b[k] = static_cast<std::byte>((rank * 31 + k) & 0xff);
  return b;
}

// `n` ranks of one hub on `server`: rank 0 at the hub, the others served.
std::vector<std::shared_ptr<Meeting>> Join(HubServer& server, int n) {
  auto hub = std::make_shared<Hub>();
  hub->Keep(hub);  // (until every rank joined, as UniqueId's)
  const uint64_t key = server.Add(hub);
  std::vector<std::shared_ptr<Meeting>> ranks(static_cast<size_t>(n));
  std::shared_ptr<Hub> held;
  EXPECT_TRUE(hub->Join(n, &held).ok());
  ranks[0] = held;
  for (int r = 1; r < n; ++r) {
    Result<std::shared_ptr<Meeting>> got = JoinServed(server.name(), key, n, r, 20s);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (got.ok()) ranks[static_cast<size_t>(r)] = *got;
  }
  return ranks;
}

// fn(rank) on a thread per rank.
void Each(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

class ServedHub : public ::testing::TestWithParam<int> {};

TEST_P(ServedHub, EveryRankGetsEveryRanksBytesAndItsSendsInOrder) {
  const int n = GetParam();
  auto server = HubServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::vector<std::shared_ptr<Meeting>> ranks = Join(**server, n);
  ASSERT_EQ(ranks.size(), static_cast<size_t>(n));
  for (const auto& m : ranks) ASSERT_NE(m, nullptr);
  Each(n, [&](int r) {
    Meeting& m = *ranks[static_cast<size_t>(r)];
    for (uint64_t seq = 0; seq < 3; ++seq) {
      // (Sizes 0, 1 and odd: rank r gives r + seq * 1000 bytes.)
      const size_t mine = static_cast<size_t>(r) + seq * 1000;
      std::vector<std::vector<std::byte>> got;
      const Status st =
          m.Meet(seq, r, BytesOf(r, mine), Clock::now() + 20s, [&](const auto& all) { got = all; });
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_EQ(got.size(), static_cast<size_t>(n));
      for (int k = 0; k < n; ++k) {
        EXPECT_EQ(got[static_cast<size_t>(k)], BytesOf(k, static_cast<size_t>(k) + seq * 1000))
            << "round " << seq << ", rank " << k << "'s bytes on rank " << r;
      }
    }
    // Two sends to the next rank, received in order.
    const int to = (r + 1) % n, from = (r + n - 1) % n;
    ASSERT_TRUE(m.Post(r, to, BytesOf(r, 5)).ok());
    ASSERT_TRUE(m.Post(r, to, BytesOf(r + 100, 7)).ok());
    Result<std::vector<std::byte>> first = m.Take(from, r, Clock::now() + 20s);
    Result<std::vector<std::byte>> second = m.Take(from, r, Clock::now() + 20s);
    ASSERT_TRUE(first.ok() && second.ok());
    EXPECT_EQ(*first, BytesOf(from, 5));
    EXPECT_EQ(*second, BytesOf(from + 100, 7));
    EXPECT_TRUE(m.ended(r).ok());
  });
}

// A served rank's End ends its own wait, not the others' (they wait on, to
// their deadline); an Abort ends every rank's, saying why.
TEST_P(ServedHub, AnEndEndsOneRanksWaitAndAnAbortEveryRanks) {
  const int n = GetParam();
  auto server = HubServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int last = n - 1;
  std::vector<Status> st(static_cast<size_t>(n));
  std::vector<std::shared_ptr<Meeting>> ranks = Join(**server, n);
  Each(n, [&](int r) {
    Meeting& m = *ranks[static_cast<size_t>(r)];
    std::thread end;
    if (r == last) {
      end = std::thread([&] {
        std::this_thread::sleep_for(200ms);
        m.End(r, AbortedError("rank " + std::to_string(r) + " aborted its communicator"));
      });
    }
    // (`last` waits in a round of its own, which its end ends.)
    st[static_cast<size_t>(r)] =
        m.Meet(r == last ? 5 : 0, r, BytesOf(r, 3), Clock::now() + 1500ms, [](const auto&) {});
    if (end.joinable()) end.join();
  });
  for (int r = 0; r < n; ++r) {
    const Status& s = st[static_cast<size_t>(r)];
    if (r == last) {
      EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
      EXPECT_NE(s.message().find("aborted its communicator"), std::string::npos) << s.ToString();
    } else {  // (waiting for `last`, which left: their deadline)
      EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
    }
  }
  ranks = Join(**server, n);
  Each(n, [&](int r) {
    Meeting& m = *ranks[static_cast<size_t>(r)];
    if (r == last) {
      std::this_thread::sleep_for(200ms);
      m.Abort("rank " + std::to_string(r) + " aborted it");
      return;
    }
    st[static_cast<size_t>(r)] =
        m.Meet(0, r, BytesOf(r, 3), Clock::now() + 20s, [](const auto&) {});
  });
  for (int r = 0; r < last; ++r) {
    const Status& s = st[static_cast<size_t>(r)];
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
    EXPECT_NE(s.message().find("rank " + std::to_string(last) + " aborted it"), std::string::npos)
        << s.ToString();
  }
}

// The serving process ends (its server goes) while the others wait in a
// round: their waits end at once, saying that it ended; and a call after
// that says it cannot be reached.
TEST_P(ServedHub, TheServingSideEndingFailsTheOthersWaitsSayingSo) {
  const int n = GetParam();
  auto server = HubServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::vector<std::shared_ptr<Meeting>> ranks = Join(**server, n);
  std::vector<Status> st(static_cast<size_t>(n));
  const auto start = std::chrono::steady_clock::now();
  Each(n, [&](int r) {
    if (r == 0) {
      std::this_thread::sleep_for(300ms);
      server->reset();
      return;
    }
    st[static_cast<size_t>(r)] = ranks[static_cast<size_t>(r)]->Meet(
        0, r, BytesOf(r, 3), Clock::now() + 20s, [](const auto&) {});
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "a wait went on to its deadline";
  for (int r = 1; r < n; ++r) {
    const Status& s = st[static_cast<size_t>(r)];
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
    EXPECT_NE(s.message().find("the communicator's meeting was closed"), std::string::npos)
        << s.ToString();
    const Status after = ranks[static_cast<size_t>(r)]->ended(r);
    EXPECT_NE(after.message().find("cannot be reached"), std::string::npos) << after.ToString();
  }
}

// A call whose server cannot be reached (its process ended) waits on, as
// NCCL's kernels wait for a peer whose process ended, until its rank's own
// end (the communicator aborted) or its deadline; so the work after it on
// the stream does not run as if it had succeeded.
TEST(ServedHubs, ACallWhoseServerIsGoneWaitsUntilItsRankEnds) {
  auto server = HubServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::vector<std::shared_ptr<Meeting>> ranks = Join(**server, 2);
  server->reset();
  Meeting& served = *ranks[1];
  const auto start = std::chrono::steady_clock::now();
  Status st = served.Meet(0, 1, BytesOf(1, 3), Clock::now() + 300ms, [](const auto&) {});
  EXPECT_EQ(st.code(), StatusCode::kTimeout) << st.ToString();
  EXPECT_NE(st.message().find("cannot be reached"), std::string::npos) << st.ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms) << "did not wait";
  std::thread end([&] {
    std::this_thread::sleep_for(200ms);
    served.End(1, AbortedError("rank 1 aborted its communicator"));
  });
  st = served.Meet(1, 1, BytesOf(1, 3), Clock::now() + 20s, [](const auto&) {});
  end.join();
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "its end did not end the wait";
}

// The server holds a hub only for its ranks of other processes: once they
// left and its own ranks let go, the hub is gone (a communicator aborted
// and made again leaves nothing behind).
TEST(ServedHubs, AHubGoesWhenItsRanksLetGo) {
  auto server = HubServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::weak_ptr<Hub> gone;
  {
    std::vector<std::shared_ptr<Meeting>> ranks = Join(**server, 3);
    gone = std::dynamic_pointer_cast<Hub>(ranks[0]);
    ASSERT_FALSE(gone.expired());
    ranks[0].reset();
    EXPECT_FALSE(gone.expired()) << "gone while ranks of other processes use it";
  }
  EXPECT_TRUE(gone.expired()) << "kept after every rank let go";
}

// A call naming ranks outside the communicator is refused, by name.
TEST(ServedHubs, RanksOutsideTheCommunicatorAreRefused) {
  auto server = HubServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto hub = std::make_shared<Hub>();
  hub->Keep(hub);
  const uint64_t key = (*server)->Add(hub);
  Result<std::shared_ptr<Meeting>> bad = JoinServed((*server)->name(), key, 2, 5, 20s);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ranks outside the communicator (rank 5"),
            std::string::npos)
      << bad.status().ToString();
  Result<std::shared_ptr<Meeting>> one = JoinServed((*server)->name(), key, 2, 1, 20s);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  const Status post = (*one)->Post(1, 7, BytesOf(1, 3));
  EXPECT_NE(post.message().find("peer 7"), std::string::npos) << post.ToString();
  Result<std::shared_ptr<Meeting>> unknown = JoinServed((*server)->name(), key + 1, 2, 1, 20s);
  EXPECT_FALSE(unknown.ok());
  std::shared_ptr<Hub> held;  // (the last rank joins: the hub no longer holds itself)
  EXPECT_TRUE(hub->Join(2, &held).ok());
}

INSTANTIATE_TEST_SUITE_P(Worlds, ServedHub, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "np" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace hora::host_nccl
