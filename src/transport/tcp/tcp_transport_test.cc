// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/tcp/tcp_transport.h"

#include <gtest/gtest.h>

#include <numeric>
#include <thread>

#include "net/socket.h"
#include "store/memory_store.h"
#include "transport/tcp/tcp_transport_impl.h"

namespace hora {
namespace {

TimePoint Soon() { return Clock::now() + std::chrono::seconds(30); }

// Builds one TCP transport per rank (ranks as threads, loopback addresses).
// `yield`: as where the ranks outnumber the cores (TcpMeshOptions::yield).
std::vector<std::unique_ptr<Transport>> Mesh(int n, const std::string& secret = "s3cret",
                                             const std::string& iface = "127.0.0.1",
                                             bool yield = false,
                                             Duration spin = TcpMeshOptions{}.wait_spin) {
  MemoryStore store;
  std::vector<std::unique_ptr<Transport>> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      TcpMeshOptions o;
      o.rank = r;
      o.size = n;
      o.key_prefix = "test";
      o.secret = secret;
      o.iface = iface;
      o.timeout = std::chrono::seconds(30);
      o.yield = yield;
      o.wait_spin = spin;
      auto t = CreateTcpTransport(store, o);
      EXPECT_TRUE(t.ok()) << t.status().ToString();
      if (t.ok()) out[static_cast<size_t>(r)] = std::move(t).value();
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

void AddF64(DataType, ReduceOp, void* dst, const void* src, size_t count) {
  for (size_t i = 0; i < count; ++i)
    static_cast<double*>(dst)[i] += static_cast<const double*>(src)[i];
}

// Every pair of a 3-rank mesh exchanges a message in both directions.
void ExpectEveryPairTalks(std::vector<std::unique_ptr<Transport>>& t) {
  const int n = static_cast<int>(t.size());
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      std::vector<int> src(1000 + 7 * a + b), dst(src.size(), -1);
      std::iota(src.begin(), src.end(), 100 * a + b);
      Request r = t[static_cast<size_t>(b)]->Irecv(a, 9, dst.data(), dst.size() * sizeof(int));
      Request s = t[static_cast<size_t>(a)]->Isend(b, 9, src.data(), src.size() * sizeof(int));
      ASSERT_TRUE(t[static_cast<size_t>(b)]->Wait(r, Soon()).ok());
      ASSERT_TRUE(t[static_cast<size_t>(a)]->Wait(s, Soon()).ok());
      EXPECT_EQ(src, dst) << a << " -> " << b;
    }
  }
}

// HORA_IFACE as an IPv6 address, and as an interface name.
TEST(TcpTransport, MeshOverIpv6Loopback) {
  auto t = Mesh(3, "s3cret", "::1");
  ASSERT_TRUE(t[0] && t[1] && t[2]);
  ExpectEveryPairTalks(t);
}

TEST(TcpTransport, MeshOnANamedInterface) {
  Result<std::string> lo = AdvertisedAddress("lo");
  ASSERT_TRUE(lo.ok()) << lo.status().ToString();
  EXPECT_TRUE(*lo == "127.0.0.1" || *lo == "::1") << *lo;
  auto t = Mesh(3, "s3cret", "lo");
  ASSERT_TRUE(t[0] && t[1] && t[2]);
  ExpectEveryPairTalks(t);
  Result<std::string> none = AdvertisedAddress("hora-no-such-if0");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("HORA_IFACE='hora-no-such-if0': no such interface"),
            std::string::npos)
      << none.status().message();
  EXPECT_NE(none.status().message().find("(this host has lo"), std::string::npos)
      << "the interfaces there are: " << none.status().message();
}

TEST(TcpTransport, MessagesOfEverySizeInBothPostOrders) {
  auto t = Mesh(2);
  ASSERT_TRUE(t[0] && t[1]);
  // (Up to kTcpSpinBytes the waiter moves the socket itself; beyond, the I/O thread.)
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{7}, size_t{65536}, (size_t{1} << 20) + 5,
                       tcp_internal::kTcpSpinBytes + 3, (size_t{16} << 20) + 3}) {
    std::vector<uint8_t> src(bytes), dst(bytes, 0);
    std::iota(src.begin(), src.end(), static_cast<uint8_t>(bytes));
    Request r = t[1]->Irecv(0, 1, dst.data(), bytes);
    Request s = t[0]->Isend(1, 1, src.data(), bytes);
    ASSERT_TRUE(t[1]->Wait(r, Soon()).ok());
    ASSERT_TRUE(t[0]->Wait(s, Soon()).ok());
    EXPECT_EQ(src, dst) << bytes;
    std::fill(dst.begin(), dst.end(), 0);
    Request s2 = t[0]->Isend(1, 2, src.data(), bytes);  // sent first: arrives unexpected
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    Request r2 = t[1]->Irecv(0, 2, dst.data(), bytes);
    ASSERT_TRUE(t[1]->Wait(r2, Soon()).ok());
    EXPECT_EQ(src, dst) << bytes;
  }
}

// Where the ranks outnumber the cores, a waiter yields the core between its
// looks at the socket: more ranks (threads) than this machine's cores pass
// small messages around a ring, each waiting in turn, and every one arrives
// whole, in order, with the waits polling and sleeping alike.
TEST(TcpTransport, WaitersThatYieldTheCoreGetEveryMessage) {
  constexpr int kRanks = 4;
  auto t = Mesh(kRanks, "s3cret", "127.0.0.1", /*yield=*/true);
  for (const auto& x : t) ASSERT_TRUE(x);
  std::vector<std::thread> ranks;
  std::vector<int> wrong(kRanks, 0);
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      Transport& me = *t[static_cast<size_t>(r)];
      const int next = (r + 1) % kRanks, prev = (r + kRanks - 1) % kRanks;
      for (uint64_t i = 0; i < 300; ++i) {
        const uint64_t out = i * 100 + static_cast<uint64_t>(r);
        uint64_t in = 0;
        Request rr = me.Irecv(prev, i, &in, sizeof in);
        Request rs = me.Isend(next, i, &out, sizeof out);
        if (!me.Wait(rr, Soon()).ok() || !me.Wait(rs, Soon()).ok() ||
            in != i * 100 + static_cast<uint64_t>(prev)) {
          ++wrong[static_cast<size_t>(r)];
        }
        // Now and then a wait outlasts the spin and sleeps.
        if (i % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  for (std::thread& x : ranks) x.join();
  EXPECT_EQ(wrong, std::vector<int>(kRanks, 0));
  std::vector<std::thread> closers;  // (all at once: each waits for the others' goodbyes)
  for (auto& x : t) closers.emplace_back([&x] { x.reset(); });
  for (std::thread& x : closers) x.join();
}

// A waiter reading a peer takes its arrivals off the I/O thread's watch
// (the peer is quiet); what then comes from that peer for a receive nobody
// spins on (waited on its request alone) is still read by the I/O thread,
// once a tick (10 ms) finds no waiter on it: a message a waiter would move
// (8 B) and one above the waiters' bound (kTcpSpinBytes). (Without the ticks
// it waits out its 30 s deadline; 400 ms leaves a loaded machine room.)
TEST(TcpTransport, AQuietPeerStillDeliversWhatNoWaiterReads) {
  // (A spin long enough that rank 1's waiter, not a sleep, meets the ping.)
  auto t = Mesh(2, "s3cret", "127.0.0.1", false, std::chrono::seconds(20));
  ASSERT_TRUE(t[0] && t[1]);
  auto* rank1 = dynamic_cast<tcp_internal::TcpTransport*>(t[1].get());
  ASSERT_NE(rank1, nullptr);
  for (size_t bytes : {size_t{8}, tcp_internal::kTcpSpinBytes + 3}) {
    std::vector<char> out(bytes, 'q'), in(bytes, 0);
    // Rank 1 waits, spinning, for a ping sent later: its waiter reads it, and
    // peer 0 is quiet on rank 1 for a tick or two after. (Tried again when a
    // tick came first on a loaded machine.)
    bool quiet = false;
    for (uint64_t attempt = 0; attempt < 50 && !quiet; ++attempt) {
      uint64_t ping = attempt, got = ~uint64_t{0};
      Request pr = t[1]->Irecv(0, 100 + attempt, &got, sizeof got);
      std::thread later([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        Request ps = t[0]->Isend(1, 100 + attempt, &ping, sizeof ping);
        EXPECT_TRUE(ps->Wait(Soon()).ok());
      });
      const Status st = t[1]->Wait(pr, Soon());
      quiet = rank1->QuietPeers() == 1;
      later.join();
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_EQ(got, attempt);
    }
    ASSERT_TRUE(quiet) << "peer 0 never seen quiet on rank 1";
    Request r = t[1]->Irecv(0, 2, in.data(), bytes);
    const TimePoint sent = Clock::now();
    Request s = t[0]->Isend(1, 2, out.data(), bytes);
    ASSERT_TRUE(r->Wait(Soon()).ok());  // (the request's own wait: no transport reads)
    const Duration took = Clock::now() - sent;
    ASSERT_TRUE(t[0]->Wait(s, Soon()).ok());
    EXPECT_EQ(in, out) << bytes;
    EXPECT_LT(took, std::chrono::milliseconds(400)) << bytes << " B: read late";
  }
  // With no waiter on it, the peer is given back.
  const TimePoint until = Clock::now() + std::chrono::seconds(10);
  while (rank1->QuietPeers() != 0 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(rank1->QuietPeers(), 0);
}

// While a wait that outlasted its spin sleeps, its peer is the I/O
// thread's (the wait gives it back before it sleeps; at the latest a tick
// would), and a large receive posted gives a quiet peer back at once.
TEST(TcpTransport, SleepingWaitsAndLargeReceivesLeaveAPeerWatched) {
  // A spin of 10 ms: the replies 80 ms late outlast it (looked at 40 ms
  // in), and a reply 50 us late comes within it also under a sanitizer on
  // busy cores, where a thread may wait a few ms for its turn (with 200 us,
  // none of 50 came within it in one ASan run of CI).
  auto t = Mesh(2, "s3cret", "127.0.0.1", false, std::chrono::milliseconds(10));
  ASSERT_TRUE(t[0] && t[1]);
  auto* rank1 = dynamic_cast<tcp_internal::TcpTransport*>(t[1].get());
  ASSERT_NE(rank1, nullptr);
  for (uint64_t i = 0; i < 3; ++i) {  // the reply 80 ms late: the wait sleeps
    uint64_t ping = i, got = ~uint64_t{0};
    Request pr = t[1]->Irecv(0, 200 + i, &got, sizeof got);
    int quiet_while_asleep = -1;
    std::thread later([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
      quiet_while_asleep = rank1->QuietPeers();
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
      EXPECT_TRUE(t[0]->Isend(1, 200 + i, &ping, sizeof ping)->Wait(Soon()).ok());
    });
    const Status st = t[1]->Wait(pr, Soon());
    later.join();
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(got, i);
    EXPECT_EQ(quiet_while_asleep, 0) << i;
  }
  const uint64_t turns = rank1->QuietTurns();
  EXPECT_GE(turns, 1u);  // (each wait made it quiet while it spun)
  // A wait that ends within its spin leaves the peer quiet ...
  bool quiet = false;
  for (uint64_t attempt = 0; attempt < 200 && !quiet; ++attempt) {
    uint64_t ping = attempt, got = 0;
    Request pr = t[1]->Irecv(0, 300 + attempt, &got, sizeof got);
    Request ps = t[0]->Isend(1, 300 + attempt, &ping, sizeof ping);
    ASSERT_TRUE(t[1]->Wait(pr, Soon()).ok());
    ASSERT_TRUE(t[0]->Wait(ps, Soon()).ok());
    Request pr2 = t[1]->Irecv(0, 400 + attempt, &got, sizeof got);
    std::thread later([&] {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      EXPECT_TRUE(t[0]->Isend(1, 400 + attempt, &ping, sizeof ping)->Wait(Soon()).ok());
    });
    const Status st = t[1]->Wait(pr2, Soon());
    quiet = rank1->QuietPeers() == 1;
    later.join();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  ASSERT_TRUE(quiet) << "peer 0 never seen quiet on rank 1";
  // ... and a large receive posted gives it back at once.
  std::vector<char> big_out(tcp_internal::kTcpSpinBytes + 1, 'b'), big_in(big_out.size());
  Request r = t[1]->Irecv(0, 500, big_in.data(), big_in.size());
  EXPECT_EQ(rank1->QuietPeers(), 0);
  Request s = t[0]->Isend(1, 500, big_out.data(), big_out.size());
  EXPECT_TRUE(t[1]->Wait(r, Soon()).ok());
  EXPECT_TRUE(t[0]->Wait(s, Soon()).ok());
  EXPECT_EQ(big_in, big_out);
}

// WaitAlso calls `also` while it moves the socket and, once asleep, between
// its slices: here the message comes only once `also` was called 100 times
// over 20 ms, far past the waiter's spin (as a peer across hosts answers
// only once this host's shared memory moved, HybridTransport), for a small
// request and one above the waiters' bound. (On a loaded machine a slice
// of 200 us took about 45 ms: a count alone, 2000 calls, outlasted the 30 s
// deadline.)
TEST(TcpTransport, WaitAlsoKeepsTheOtherTransportMoving) {
  auto t = Mesh(2);
  ASSERT_TRUE(t[0] && t[1]);
  for (size_t bytes : {size_t{8}, tcp_internal::kTcpSpinBytes + 1}) {
    std::vector<char> out(bytes, 'w'), in(bytes, 0);
    Request r = t[1]->Irecv(0, 9, in.data(), bytes);
    Request s;
    int calls = 0;
    const TimePoint send_after = Clock::now() + std::chrono::milliseconds(20);
    const Status st = t[1]->WaitAlso(r, Soon(), [&] {
      if (++calls >= 100 && !s && Clock::now() >= send_after) {
        s = t[0]->Isend(1, 9, out.data(), bytes);
      }
      return false;
    });
    ASSERT_TRUE(st.ok()) << st.ToString() << " (also called " << calls << " times)";
    EXPECT_GE(calls, 100);
    ASSERT_TRUE(t[0]->Wait(s, Soon()).ok());
    EXPECT_EQ(in, out) << bytes;
  }
}

// A large message set aside, then a small one that reuses its (pooled)
// buffer: the small one is delivered by its own size, and a receive of the
// wrong size names that size, not the buffer's.
TEST(TcpTransport, SetAsideBuffersAreReusedBySize) {
  auto t = Mesh(2);
  ASSERT_TRUE(t[0] && t[1]);
  std::vector<uint8_t> big(1 << 20), small(100), wrong(100);
  std::iota(big.begin(), big.end(), uint8_t{3});
  std::iota(small.begin(), small.end(), uint8_t{77});
  for (Tag tag : {Tag{1}, Tag{2}, Tag{3}}) {
    const std::vector<uint8_t>& src = tag == 1 ? big : small;
    Request s = t[0]->Isend(1, tag, src.data(), src.size());  // before any receive
    ASSERT_TRUE(t[0]->Wait(s, Soon()).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // it has arrived
    if (tag == 3) {
      Request r = t[1]->Irecv(0, tag, wrong.data(), 101);
      Status st = t[1]->Wait(r, Soon());
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
      EXPECT_NE(st.message().find("sent 100 bytes"), std::string::npos) << st.message();
      continue;
    }
    std::vector<uint8_t> dst(src.size(), 0);
    Request r = t[1]->Irecv(0, tag, dst.data(), dst.size());
    ASSERT_TRUE(t[1]->Wait(r, Soon()).ok());
    EXPECT_EQ(dst, src) << "tag " << tag;
  }
}

TEST(TcpTransport, OutOfOrderTagsAndReduceAcrossPieces) {
  auto t = Mesh(3);
  ASSERT_TRUE(t[0] && t[1] && t[2]);
  const size_t count = 300001;  // several 256 KiB pieces, not a whole number of them
  std::vector<double> a(count, 1.5), b(count, 2.0), acc(count, 10.0);
  int x = 5, y = 0;
  Request s1 = t[0]->Isend(2, 10, a.data(), count * 8);
  Request s2 = t[0]->Isend(2, 11, &x, sizeof x);
  Request s3 = t[1]->Isend(2, 10, b.data(), count * 8);
  Request ry = t[2]->Irecv(0, 11, &y, sizeof y);  // the later message first
  const ReduceSpec spec{DataType::kFloat64, ReduceOp::kSum, &AddF64};
  Request ra = t[2]->IrecvReduce(0, 10, acc.data(), count, spec);
  Request rb = t[2]->IrecvReduce(1, 10, acc.data(), count, spec);
  for (auto* r : {&ry, &ra, &rb}) ASSERT_TRUE(t[2]->Wait(*r, Soon()).ok());
  EXPECT_EQ(y, 5);
  EXPECT_EQ(acc[0], 13.5);
  EXPECT_EQ(acc[count / 2], 13.5);
  EXPECT_EQ(acc[count - 1], 13.5);
}

TEST(TcpTransport, SizeMismatchNamesBothSizes) {
  auto t = Mesh(2);
  ASSERT_TRUE(t[0] && t[1]);
  char buf[64] = {};
  Request s = t[0]->Isend(1, 3, buf, 64);
  Request r = t[1]->Irecv(0, 3, buf, 32);
  Status st = t[1]->Wait(r, Soon());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("sent 64 bytes but 32 bytes were expected (call 0, phase 0, "
                              "step 0, segment 3 of context 0)"),
            std::string::npos)
      << st.message();
  // The stream stays usable.
  int v = 9, w = 0;
  Request s2 = t[0]->Isend(1, 4, &v, 4);
  Request r2 = t[1]->Irecv(0, 4, &w, 4);
  ASSERT_TRUE(t[1]->Wait(r2, Soon()).ok());
  EXPECT_EQ(w, 9);
}

TEST(TcpTransport, ClosedRankFailsOnlyRequestsWithIt) {
  auto t = Mesh(3);
  ASSERT_TRUE(t[0] && t[1] && t[2]);
  int a = 0, b = 0;
  Request r01 = t[0]->Irecv(1, 5, &a, 4);
  Request r12 = t[1]->Irecv(2, 5, &b, 4);
  t[2].reset();  // rank 2 closes its session in an orderly way
  Status s1 = t[1]->Wait(r12, Soon());
  EXPECT_EQ(s1.code(), StatusCode::kUnavailable);
  EXPECT_NE(s1.message().find("rank 2 closed its session"), std::string::npos) << s1.message();
  // An orderly close is not a lost rank: ranks 0 and 1 still talk.
  int v = 3;
  Request s = t[1]->Isend(0, 5, &v, 4);
  ASSERT_TRUE(t[0]->Wait(r01, Soon()).ok());
  EXPECT_EQ(a, 3);
  Request late = t[0]->Isend(2, 6, &a, 4);
  EXPECT_NE(t[0]->Wait(late, Soon()).message().find("rank 2"), std::string::npos);
}

TEST(TcpTransport, WrongSecretCannotJoinAndIsLogged) {
  MemoryStore store;
  Status results[2];
  const Logger logger(LogLevel::kWarning, 0);
  testing::internal::CaptureStderr();
  std::thread a([&] {
    TcpMeshOptions o{0, 2, "x", "right", "127.0.0.1", std::chrono::milliseconds(1500)};
    o.logger = &logger;
    results[0] = CreateTcpTransport(store, o).status();
  });
  std::thread b([&] {
    TcpMeshOptions o{1, 2, "x", "wrong", "127.0.0.1", std::chrono::milliseconds(1500)};
    results[1] = CreateTcpTransport(store, o).status();
  });
  a.join();
  b.join();
  EXPECT_FALSE(results[0].ok());
  EXPECT_FALSE(results[1].ok());
  EXPECT_NE(results[1].message().find("connecting to rank 0"), std::string::npos)
      << results[1].message();
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("rank 0: refused connection from 127.0.0.1:"), std::string::npos) << log;
}

// Strangers at rank 0's port while the mesh forms: one connects and says
// nothing, twenty send garbage. Handshakes run at once, each with its own
// deadline, so the ranks connect as if they were not there, and the
// refusals are logged five at most, then counted.
TEST(TcpTransport, StrangersDoNotHoldUpTheMesh) {
  MemoryStore store;
  const Logger logger(LogLevel::kWarning, 0);
  std::vector<std::unique_ptr<Transport>> t(3);
  std::vector<std::thread> ranks;
  auto start = [&](int r) {
    ranks.emplace_back([&, r] {
      TcpMeshOptions o{r, 3, "x", "s3cret", "127.0.0.1", std::chrono::seconds(30)};
      o.logger = &logger;
      auto made = CreateTcpTransport(store, o);
      EXPECT_TRUE(made.ok()) << made.status().ToString();
      if (made.ok()) t[static_cast<size_t>(r)] = std::move(made).value();
    });
  };
  testing::internal::CaptureStderr();
  start(0);
  auto addr = store.Get("x/addr/0", std::chrono::seconds(10));
  ASSERT_TRUE(addr.ok());
  auto hp = net::ParseHostPort(std::string(addr->begin(), addr->end()));
  ASSERT_TRUE(hp.ok());
  std::vector<net::Fd> strangers;
  auto idle = net::Connect(*hp, std::chrono::seconds(5));
  ASSERT_TRUE(idle.ok());
  strangers.push_back(std::move(idle).value());
  const std::string garbage(80, 'G');  // longer than a handshake response
  for (int i = 0; i < 20; ++i) {
    auto fd = net::Connect(*hp, std::chrono::seconds(5));
    ASSERT_TRUE(fd.ok());
    EXPECT_TRUE(net::SendAll(fd->get(), garbage.data(), garbage.size(), Soon()).ok());
    strangers.push_back(std::move(fd).value());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the strangers come first
  const TimePoint begun = Clock::now();
  start(1);
  start(2);
  for (auto& r : ranks) r.join();
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_LT(Clock::now() - begun, std::chrono::seconds(5));
  ASSERT_TRUE(t[0] && t[1] && t[2]);
  ExpectEveryPairTalks(t);
  size_t lines = 0;
  for (size_t at = 0; (at = log.find("refused connection from", at)) != std::string::npos; ++at) {
    ++lines;
  }
  EXPECT_GE(lines, 1u) << log;
  EXPECT_LE(lines, 5u) << log;
}

TEST(TcpTransport, CancelAndTimeoutAreBounded) {
  auto t = Mesh(2);
  ASSERT_TRUE(t[0] && t[1]);
  int v = 0;
  Request r = t[1]->Irecv(0, 7, &v, 4);
  Status st = t[1]->Wait(r, Clock::now() + std::chrono::milliseconds(50));
  EXPECT_EQ(st.code(), StatusCode::kTimeout);
  EXPECT_NE(st.message().find("receiving 4 B from rank 0"), std::string::npos) << st.message();
  t[1]->Cancel(r);
  EXPECT_EQ(r->status().code(), StatusCode::kAborted);
  int x = 42;
  Request s = t[0]->Isend(1, 7, &x, 4);  // arrives after the cancel: must not land in v
  ASSERT_TRUE(t[0]->Wait(s, Soon()).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(v, 0);
}

}  // namespace
}  // namespace hora
