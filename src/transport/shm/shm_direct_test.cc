// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Single-copy messages of the shm transport (read by the receiver from the
// sender's memory, shm_direct.h), ranks as threads: the pairs that fall
// back to the slots, set-aside and mismatched messages, and a sender that
// cancels, closes or frees its buffer (a lost peer: shm_direct_loss_test.cc).
// Sizes around the threshold, and that such a send waits for its receive:
// shm_transport_test.cc.
#include <sys/mman.h>

#include <algorithm>
#include <barrier>

#include "support/shm_test_util.h"
#include "transport/shm/shm_direct.h"

namespace hora {
namespace {

using shm_test::Options;
using shm_test::RunRanks;
using shm_test::Soon;
using shm_test::UniqueJobId;

std::vector<uint8_t> Filled(size_t bytes, size_t salt) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>((i * 151 + salt * 13) >> 2);
  return v;
}

Duration Ms(int ms) { return std::chrono::milliseconds(ms); }

TEST(ShmDirectRead, ReadsThisProcessAndNamesWhyItCannot) {
  SKIP_WHERE_THE_KERNEL_FORBIDS_READS();
  const std::vector<uint8_t> src = Filled(3 * kShmSlotBytes + 5, 1);
  std::vector<uint8_t> dst(src.size());
  ASSERT_TRUE(
      ReadFromProcess(getpid(), reinterpret_cast<uintptr_t>(src.data()), dst.data(), dst.size())
          .ok());
  EXPECT_TRUE(dst == src);
  const uint64_t token = 0x1234567890abcdefULL;
  EXPECT_TRUE(CanReadProcess(getpid(), reinterpret_cast<uintptr_t>(&token), token));
  EXPECT_FALSE(CanReadProcess(getpid(), reinterpret_cast<uintptr_t>(&token), token + 1));
  EXPECT_FALSE(CanReadProcess(0, reinterpret_cast<uintptr_t>(&token), token));
  // An address nothing readable is mapped at.
  void* gone = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(gone, MAP_FAILED);
  const Status st = ReadFromProcess(getpid(), reinterpret_cast<uintptr_t>(gone), dst.data(), 16);
  munmap(gone, 4096);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("process_vm_readv"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("after 0"), std::string::npos) << st.message();
}

// A rank with single copy off can be read by its peers but is not read
// from: what it receives comes through the slots (a 1 MiB send to it is
// done before any receive), what it sends too.
TEST(ShmDirect, APeerThatDoesNotReadDirectlyIsSentThroughTheSlots) {
  SKIP_WHERE_THE_KERNEL_FORBIDS_READS();
  std::barrier sync(2);
  const size_t n = 1 << 20;
  RunRanks(
      2, UniqueJobId("direct-off"),
      [&](Transport& t) {
        const int peer = 1 - t.rank();
        std::vector<uint8_t> out = Filled(n, static_cast<size_t>(t.rank())), in(n);
        Request s = t.Isend(peer, 1, out.data(), n);
        EXPECT_TRUE(t.WaitFor(s, Ms(2000)).ok()) << "rank " << t.rank();
        sync.arrive_and_wait();
        ASSERT_TRUE(t.Wait(t.Irecv(peer, 1, in.data(), n), Soon()).ok());
        EXPECT_TRUE(in == Filled(n, static_cast<size_t>(peer)));
      },
      [](int r) { return Options(r == 0 ? 0 : 4096); });
}

ShmOptions OnRequest(size_t single_copy_bytes, bool on_request) {
  ShmOptions o = Options(single_copy_bytes);
  o.single_copy_on_request = on_request;
  return o;
}

// IsendInPlace goes direct whatever its size where both ranks allow it, even
// with no threshold (a direct send is not done before its receive); a plain
// Isend of the same size goes through the slots, done at once.
TEST(ShmDirect, AnInPlaceSendGoesDirectOnRequestWithoutAThreshold) {
  SKIP_WHERE_THE_KERNEL_FORBIDS_READS();
  std::barrier sync(2);
  RunRanks(
      2, UniqueJobId("direct-request"),
      [&](Transport& t) {
        const int peer = 1 - t.rank();
        EXPECT_TRUE(t.ReadsOnRequest(0, 1));
        EXPECT_TRUE(t.ReadsOnRequest(1, 0));
        EXPECT_FALSE(t.ReadsOnRequest(0, 0));
        EXPECT_FALSE(t.ReadsInPlace(0, 1, size_t{1} << 30));  // no threshold
        for (const size_t n : {size_t{1}, size_t{100}, 3 * kShmSlotBytes + 7}) {
          std::vector<uint8_t> out = Filled(n, static_cast<size_t>(t.rank()) + n), in(n);
          Request plain = t.Isend(peer, 1, out.data(), n);
          Request direct = t.IsendInPlace(peer, 2, out.data(), n);
          EXPECT_TRUE(t.WaitFor(plain, Ms(2000)).ok()) << n;
          EXPECT_EQ(t.WaitFor(direct, Ms(50)).code(), StatusCode::kTimeout) << n;
          sync.arrive_and_wait();  // both sends posted, neither direct one read
          ASSERT_TRUE(t.Wait(t.Irecv(peer, 1, in.data(), n), Soon()).ok());
          EXPECT_TRUE(in == Filled(n, static_cast<size_t>(peer) + n)) << n;
          in.assign(n, 0);
          ASSERT_TRUE(t.Wait(t.Irecv(peer, 2, in.data(), n), Soon()).ok());
          EXPECT_TRUE(in == Filled(n, static_cast<size_t>(peer) + n)) << n;
          EXPECT_TRUE(t.Wait(direct, Soon()).ok()) << n;
          sync.arrive_and_wait();
        }
      },
      [](int) { return OnRequest(0, true); });
}

// Where either rank does not allow it (HORA_SHM_SINGLE_COPY_BYTES=0), no
// pair reads on request, and IsendInPlace is a send through the slots.
TEST(ShmDirect, NoReadsOnRequestWhereEitherRankSaysNo) {
  SKIP_WHERE_THE_KERNEL_FORBIDS_READS();
  for (const int refusing : {0, 1}) {
    std::barrier sync(2);
    RunRanks(
        2, UniqueJobId("direct-no-request"),
        [&](Transport& t) {
          const int peer = 1 - t.rank();
          EXPECT_FALSE(t.ReadsOnRequest(0, 1)) << refusing;
          EXPECT_FALSE(t.ReadsOnRequest(1, 0)) << refusing;
          const size_t n = 3 * kShmSlotBytes;
          std::vector<uint8_t> out = Filled(n, static_cast<size_t>(t.rank())), in(n);
          EXPECT_TRUE(t.WaitFor(t.IsendInPlace(peer, 1, out.data(), n), Ms(2000)).ok());
          sync.arrive_and_wait();
          ASSERT_TRUE(t.Wait(t.Irecv(peer, 1, in.data(), n), Soon()).ok());
          EXPECT_TRUE(in == Filled(n, static_cast<size_t>(peer)));
        },
        [&](int r) { return OnRequest(0, r != refusing); });
  }
}

// A direct message at the head of the ring while a receive of another tag
// waits is read into a set-aside buffer (so its sender is done), then
// served from there; one of the wrong size fails its receive only.
TEST(ShmDirect, SetAsideAndMismatchedLikeAnyMessage) {
  SKIP_WHERE_THE_KERNEL_FORBIDS_READS();
  RunRanks(
      2, UniqueJobId("direct-aside"),
      [&](Transport& t) {
        const size_t big = 5 * kShmSlotBytes + 9;
        std::vector<uint8_t> a = Filled(big, 1), b = Filled(16, 2), c = Filled(big, 3);
        if (t.rank() == 0) {
          Request s[] = {t.Isend(1, 5, a.data(), big), t.Isend(1, 6, b.data(), 16),
                         t.Isend(1, 7, c.data(), big), t.Isend(1, 8, b.data(), 16)};
          for (auto& r : s) ASSERT_TRUE(t.Wait(r, Soon()).ok());
        } else {
          std::vector<uint8_t> got_a(big), got_b(16), wrong(big - 1);
          ASSERT_TRUE(t.Wait(t.Irecv(0, 6, got_b.data(), 16), Soon()).ok());
          EXPECT_TRUE(got_b == b);
          Request r5 = t.Irecv(0, 5, got_a.data(), big);  // from the set-aside queue
          ASSERT_TRUE(r5->done());
          ASSERT_TRUE(t.Wait(r5, Soon()).ok());
          EXPECT_TRUE(got_a == a);
          const Status st = t.Wait(t.Irecv(0, 7, wrong.data(), wrong.size()), Soon());
          EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
          EXPECT_TRUE(std::all_of(wrong.begin(), wrong.end(), [](uint8_t v) { return v == 0; }));
          got_b.assign(16, 0);
          ASSERT_TRUE(t.Wait(t.Irecv(0, 8, got_b.data(), 16), Soon()).ok());  // still usable
          EXPECT_TRUE(got_b == b);
        }
      },
      [](int) { return Options(4096); });
}

// Cancelling a direct send its receiver has not claimed withdraws it: it is
// never delivered (a receive of its tag gets the next message of that tag),
// and the channel stays usable.
TEST(ShmDirect, ACancelledUnreadSendIsWithdrawnAndTheChannelStaysUsable) {
  SKIP_WHERE_THE_KERNEL_FORBIDS_READS();
  std::barrier sync(2);
  RunRanks(
      2, UniqueJobId("direct-cancel"),
      [&](Transport& t) {
        const size_t n = 1 << 20;
        if (t.rank() == 0) {
          std::vector<uint8_t> out = Filled(n, 4), again = Filled(n, 5);
          Request s = t.Isend(1, 1, out.data(), n);
          EXPECT_EQ(t.WaitFor(s, Ms(20)).code(), StatusCode::kTimeout);
          t.Cancel(s);
          EXPECT_EQ(s->status().code(), StatusCode::kAborted);
          out.assign(n, 0xab);
          sync.arrive_and_wait();
          sync.arrive_and_wait();  // the receive of tag 1 is posted and got nothing
          ASSERT_TRUE(t.Wait(t.Isend(1, 1, again.data(), n), Soon()).ok());
          ASSERT_TRUE(t.Wait(t.Isend(1, 2, again.data(), 4), Soon()).ok());
        } else {
          std::vector<uint8_t> in(n, 0), small(4, 0);
          sync.arrive_and_wait();
          Request r = t.Irecv(0, 1, in.data(), n);
          EXPECT_EQ(t.WaitFor(r, Ms(30)).code(), StatusCode::kTimeout);  // skipped
          sync.arrive_and_wait();
          ASSERT_TRUE(t.Wait(r, Soon()).ok());
          EXPECT_TRUE(in == Filled(n, 5));  // the second message, not the withdrawn one
          ASSERT_TRUE(t.Wait(t.Irecv(0, 2, small.data(), 4), Soon()).ok());
          EXPECT_TRUE(std::equal(small.begin(), small.end(), Filled(4, 5).begin()));
        }
      },
      [](int) { return Options(4096); });
}

// Cancelling a direct send its receiver has already read completes it OK
// (it was delivered); nothing breaks.
TEST(ShmDirect, CancellingASendAlreadyReadCompletesIt) {
  SKIP_WHERE_THE_KERNEL_FORBIDS_READS();
  std::barrier sync(2);
  RunRanks(
      2, UniqueJobId("direct-cancel-read"),
      [&](Transport& t) {
        const size_t n = 1 << 20;
        std::vector<uint8_t> buf = Filled(n, 6), small(4, 0);
        if (t.rank() == 0) {
          Request s = t.Isend(1, 1, buf.data(), n);
          sync.arrive_and_wait();  // read and released, not yet seen here
          t.Cancel(s);
          EXPECT_TRUE(s->status().ok()) << s->status().ToString();
          ASSERT_TRUE(t.Wait(t.Isend(1, 2, buf.data(), 4), Soon()).ok());
        } else {
          std::vector<uint8_t> in(n);
          ASSERT_TRUE(t.Wait(t.Irecv(0, 1, in.data(), n), Soon()).ok());
          EXPECT_TRUE(in == buf);
          sync.arrive_and_wait();
          ASSERT_TRUE(t.Wait(t.Irecv(0, 2, small.data(), 4), Soon()).ok());
        }
      },
      [](int) { return Options(4096); });
}

void AddFloats(DataType, ReduceOp, void* dst, const void* src, size_t count) {
  for (size_t i = 0; i < count; ++i)
    static_cast<float*>(dst)[i] += static_cast<const float*>(src)[i];
}

// A receive that folds declines a direct message; a send cancelled once
// declined was never delivered (Aborted), and the receive folds the next
// message of its tag, which comes through the slots.
TEST(ShmDirect, ADeclinedSendCancelledIsNeverDelivered) {
  SKIP_WHERE_THE_KERNEL_FORBIDS_READS();
  std::barrier sync(2);
  RunRanks(
      2, UniqueJobId("direct-declined"),
      [&](Transport& t) {
        const size_t count = 1 << 18;  // 1 MiB of float32
        if (t.rank() == 0) {
          std::vector<float> first(count, 100.0f), second(count, 2.0f);
          Request s = t.Isend(1, 1, first.data(), count * 4);
          sync.arrive_and_wait();
          sync.arrive_and_wait();  // declined
          t.Cancel(s);
          EXPECT_EQ(s->status().code(), StatusCode::kAborted) << s->status().ToString();
          ASSERT_TRUE(t.Wait(t.Isend(1, 1, second.data(), count * 4), Soon()).ok());
        } else {
          std::vector<float> acc(count, 1.0f);
          sync.arrive_and_wait();
          Request r = t.IrecvReduce(0, 1, acc.data(), count,
                                    ReduceSpec{DataType::kFloat32, ReduceOp::kSum, &AddFloats});
          EXPECT_EQ(t.WaitFor(r, Ms(20)).code(), StatusCode::kTimeout);
          sync.arrive_and_wait();
          ASSERT_TRUE(t.Wait(r, Soon()).ok());
          EXPECT_TRUE(std::all_of(acc.begin(), acc.end(), [](float v) { return v == 3.0f; }));
        }
      },
      [](int) { return Options(4096); });
}

// A sender whose transport goes with a direct send unread: the receiver
// never gets its bytes, and learns that the sender closed its session.
TEST(ShmDirect, AClosedSendersUnreadMessageIsNeverDelivered) {
  SKIP_WHERE_THE_KERNEL_FORBIDS_READS();
  std::barrier sync(2);
  RunRanks(
      2, UniqueJobId("direct-closed"),
      [&](Transport& t) {
        const size_t n = 1 << 20;
        if (t.rank() == 0) {
          std::vector<uint8_t> out = Filled(n, 7);
          Request s = t.Isend(1, 1, out.data(), n);
          EXPECT_EQ(t.WaitFor(s, Ms(20)).code(), StatusCode::kTimeout);
          // Returning destroys this rank's transport.
        } else {
          sync.arrive_and_wait();
          std::vector<uint8_t> in(n, 0);
          const Status st = t.Wait(t.Irecv(0, 1, in.data(), n), Soon());
          EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
          EXPECT_NE(st.message().find("closed"), std::string::npos) << st.message();
          EXPECT_TRUE(std::all_of(in.begin(), in.end(), [](uint8_t v) { return v == 0; }));
        }
      },
      [](int) { return Options(4096); },
      [&](int r) {
        if (r == 0) sync.arrive_and_wait();  // after rank 0's transport went
      });
}

// A sender that frees its buffer before the send is done breaks the
// contract: the receive fails with the kernel's reason instead of reading
// garbage or crashing, and the send fails at once, saying so.
TEST(ShmDirect, AFreedSendBufferFailsTheReceiveWithTheReason) {
  SKIP_WHERE_THE_KERNEL_FORBIDS_READS();
  std::barrier sync(2);
  RunRanks(
      2, UniqueJobId("direct-freed"),
      [&](Transport& t) {
        const size_t n = 1 << 20;
        if (t.rank() == 0) {
          void* buf = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
          ASSERT_NE(buf, MAP_FAILED);
          Request s = t.Isend(1, 1, buf, n);
          // Gone, and kept from being mapped again meanwhile.
          ASSERT_EQ(mmap(buf, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), buf);
          sync.arrive_and_wait();
          sync.arrive_and_wait();               // the receiver failed
          const Status st = t.Wait(s, Soon());  // at once, not at the deadline
          EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
          EXPECT_NE(st.message().find("could not read"), std::string::npos) << st.message();
          munmap(buf, n);
        } else {
          std::vector<uint8_t> in(n);
          sync.arrive_and_wait();
          const Status st = t.Wait(t.Irecv(0, 1, in.data(), n), Soon());
          EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
          EXPECT_NE(st.message().find("process_vm_readv"), std::string::npos) << st.message();
          sync.arrive_and_wait();
        }
      },
      [](int) { return Options(4096); });
}

TEST(ShmDirect, SessionsReadDirectlyOnlyWhereRanksOutnumberCores) {
  EXPECT_EQ(ShmSingleCopyBytes(256 << 10, 4, 2), size_t{256 << 10});
  EXPECT_EQ(ShmSingleCopyBytes(256 << 10, 3, 2), size_t{256 << 10});
  EXPECT_EQ(ShmSingleCopyBytes(256 << 10, 2, 2), 0u);
  EXPECT_EQ(ShmSingleCopyBytes(256 << 10, 8, 64), 0u);
  EXPECT_EQ(ShmSingleCopyBytes(0, 8, 2), 0u);  // off
}

}  // namespace
}  // namespace hora
