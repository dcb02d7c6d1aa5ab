// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A rank that loses a peer (any peer: the liveness checks' path, driven by
// ShmTransport::MarkLost since ranks here are threads of one process)
// while a single-copy send of its is in flight: unread, it is withdrawn;
// mid-read, the receiver fails the receive. Either way no receiver
// delivers bytes from a buffer the failed send handed back to its caller.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstring>
#include <thread>

#include "support/shm_test_util.h"
#include "transport/shm/shm_transport_impl.h"

namespace hora {
namespace {

using shm_test::Options;
using shm_test::RunRanks;
using shm_test::Soon;
using shm_test::UniqueJobId;

ShmChannel& Out(Transport& t, int peer) { return static_cast<ShmTransport&>(t).link(peer).out; }

void Lose(Transport& t) {
  static_cast<ShmTransport&>(t).MarkLost(UnavailableError("a peer is gone (test)"));
}

// Unread: a healthy receiver that has not learnt of the loss skips the
// withdrawn message and never sees the buffer its caller then reuses.
TEST(ShmDirectLoss, AnUnreadSendIsWithdrawn) {
  SKIP_WHERE_THE_KERNEL_FORBIDS_READS();
  std::barrier sync(2);
  RunRanks(
      2, UniqueJobId("direct-lost-unread"),
      [&](Transport& t) {
        const size_t n = 1 << 20;
        if (t.rank() == 0) {
          std::vector<uint8_t> out(n, 0xab);
          Request s = t.Isend(1, 1, out.data(), n);
          EXPECT_EQ(t.WaitFor(s, std::chrono::milliseconds(20)).code(), StatusCode::kTimeout);
          EXPECT_EQ(Out(t, 1).published(), 1u);  // published, and unclaimed
          EXPECT_FALSE(Out(t, 1).DirectClaimed(1));
          Lose(t);
          const Status st = t.Wait(s, Soon());
          EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
          EXPECT_NE(st.message().find("a peer is gone"), std::string::npos) << st.message();
          std::fill(out.begin(), out.end(), uint8_t{0xcd});  // the caller reuses it
          sync.arrive_and_wait();
          sync.arrive_and_wait();  // the receiver looked
        } else {
          sync.arrive_and_wait();
          std::vector<uint8_t> in(n, 0);
          Request r = t.Irecv(0, 1, in.data(), n);
          EXPECT_EQ(t.WaitFor(r, std::chrono::milliseconds(50)).code(), StatusCode::kTimeout);
          t.Cancel(r);
          EXPECT_TRUE(t.LostPeer().ok());
          EXPECT_TRUE(std::all_of(in.begin(), in.end(), [](uint8_t v) { return v == 0; }));
          sync.arrive_and_wait();
        }
      },
      [](int) { return Options(4096); });
}

// Mid-read (claimed; a read of 64 MiB takes milliseconds): the sender
// cannot withdraw it, so it marks the channel before the failed send hands
// the buffer back; the receiver sees the mark after its read and fails the
// receive (what it read may be torn). Where the whole read ended before the
// loss came (the sender's thread was not running meanwhile), that attempt
// proves nothing and delivers whole: another, up to kAttempts.
TEST(ShmDirectLoss, AReceiveMidReadFails) {
  SKIP_WHERE_THE_KERNEL_FORBIDS_READS();
  constexpr uint64_t kAttempts = 5;
  const size_t n = size_t{64} << 20;
  std::barrier sync(2);
  std::atomic<bool> late{false};
  RunRanks(
      2, UniqueJobId("direct-lost-mid-read"),
      [&](Transport& t) {
        for (uint64_t tag = 1; tag <= kAttempts; ++tag) {
          if (t.rank() == 0) {
            std::vector<uint8_t> out(n, 0xab);
            Request s = t.Isend(1, tag, out.data(), n);
            EXPECT_EQ(t.WaitFor(s, std::chrono::milliseconds(20)).code(), StatusCode::kTimeout);
            ShmChannel& ch = Out(t, 1);
            const uint64_t mine = ch.published();
            sync.arrive_and_wait();  // the receiver posts its receive
            // (Its buffer is not watched: TSan takes process_vm_readv for
            // a plain write of the whole buffer.)
            const TimePoint give_up = Clock::now() + std::chrono::seconds(30);
            while (!ch.DirectClaimed(mine) && Clock::now() < give_up) std::this_thread::yield();
            EXPECT_TRUE(ch.DirectClaimed(mine)) << "never claimed";
            late = ch.Released(mine);
            if (late) {
              EXPECT_TRUE(t.Wait(s, Soon()).ok());
            } else {
              Lose(t);
              EXPECT_EQ(t.Wait(s, Soon()).code(), StatusCode::kUnavailable);
              std::memset(out.data(), 0xcd, n);  // the caller reuses it
            }
            sync.arrive_and_wait();  // decided
            if (!late) {
              sync.arrive_and_wait();  // the receiver checked
              return;
            }
          } else {
            std::vector<uint8_t> in(n, 0);
            sync.arrive_and_wait();
            const Status st = t.Wait(t.Irecv(0, tag, in.data(), n), Soon());
            sync.arrive_and_wait();  // decided
            if (late) {
              EXPECT_TRUE(st.ok()) << st.ToString();
              continue;
            }
            EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
            EXPECT_NE(st.message().find("gave the message up"), std::string::npos) << st.message();
            EXPECT_TRUE(t.LostPeer().ok());  // its own peers are all well
            sync.arrive_and_wait();
            return;
          }
        }
        if (t.rank() == 0) ADD_FAILURE() << "every read ended before the loss came";
      },
      [](int) { return Options(4096); });
}

}  // namespace
}  // namespace hora
