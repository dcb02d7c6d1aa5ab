// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Point-to-point behaviour of the shm transport, ranks as threads (each rank
// maps the shared segments itself). Collectives over it: shm_algorithms_test.
#include <barrier>
#include <cstring>
#include <numeric>

#include "support/shm_test_util.h"

namespace hora {
namespace {

using shm_test::RunRanks;
using shm_test::Soon;
using shm_test::UniqueJobId;

uint8_t Pattern(size_t i, size_t salt) { return static_cast<uint8_t>((i * 131 + salt * 7) >> 3); }

std::vector<uint8_t> Filled(size_t bytes, size_t salt) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = Pattern(i, salt);
  return v;
}

// Each size in both post orders, with single copy from `single_copy` bytes
// (0: never). A send is done before its receive is posted where it fits the
// ring and goes through the slots, and only there.
void CheckSizesInBothPostOrders(const std::vector<size_t>& sizes, size_t single_copy) {
  std::barrier sync(2);
  RunRanks(
      2, UniqueJobId("sizes"),
      [&](Transport& t) {
        EXPECT_STREQ(t.name(), "shm");
        for (size_t k = 0; k < sizes.size(); ++k) {
          for (int recv_first = 0; recv_first < 2; ++recv_first) {
            const size_t n = sizes[k];
            const Tag tag = k * 2 + static_cast<Tag>(recv_first);
            if (t.rank() == 0) {
              std::vector<uint8_t> out = Filled(n, tag);
              if (recv_first) sync.arrive_and_wait();
              Request s = t.Isend(1, tag, out.data(), n);
              if (!recv_first) {
                const bool eager =
                    (single_copy == 0 || n < single_copy) && n <= kShmSlotCount * kShmSlotBytes;
                const Status early = t.WaitFor(s, std::chrono::milliseconds(30));
                EXPECT_EQ(early.ok(), eager) << n << ": " << early.ToString();
                sync.arrive_and_wait();
              }
              ASSERT_TRUE(t.Wait(s, Soon()).ok()) << n;
            } else {
              std::vector<uint8_t> in(n + 1, 0xee);
              if (!recv_first) sync.arrive_and_wait();
              Request r = t.Irecv(0, tag, in.data(), n);
              if (recv_first) sync.arrive_and_wait();
              ASSERT_TRUE(t.Wait(r, Soon()).ok()) << n;
              EXPECT_EQ(in.back(), 0xee) << n;  // nothing past the end
              in.pop_back();
              EXPECT_TRUE(in == Filled(n, tag)) << n << " bytes, receive first: " << recv_first;
            }
          }
        }
      },
      [&](int) { return shm_test::Options(single_copy); });
}

TEST(ShmTransport, SmallAndLargeMessagesInBothPostOrders) {
  CheckSizesInBothPostOrders({0, 1, 7, 64 << 10, (16 << 20) + 3}, 0);
}

TEST(ShmTransport, MessagesFromTheSingleCopyThresholdOnWaitForTheirReceive) {
  SKIP_WHERE_THE_KERNEL_FORBIDS_READS();
  constexpr size_t kAt = 64 << 10;
  CheckSizesInBothPostOrders({0, kAt - 1, kAt, kAt + 1, 3 * kShmSlotBytes + 7, (16 << 20) + 3},
                             kAt);
}

TEST(ShmTransport, ReceivesMatchByTagThroughTheUnexpectedQueue) {
  RunRanks(2, UniqueJobId("tags"), [&](Transport& t) {
    const size_t big = 3 * kShmSlotBytes + 5;  // spans several slots
    std::vector<uint8_t> a = Filled(big, 1), b = Filled(16, 2), c = Filled(100, 3);
    if (t.rank() == 0) {
      // Same tag twice (must stay in order), then another tag.
      Request s[] = {t.Isend(1, 5, a.data(), big), t.Isend(1, 5, b.data(), 16),
                     t.Isend(1, 6, c.data(), 100)};
      for (auto& r : s) ASSERT_TRUE(t.Wait(r, Soon()).ok());
    } else {
      std::vector<uint8_t> got_a(big), got_b(16), got_c(100);
      Request r6 = t.Irecv(0, 6, got_c.data(), 100);  // behind both tag-5 messages
      ASSERT_TRUE(t.Wait(r6, Soon()).ok());
      Request r5a = t.Irecv(0, 5, got_a.data(), big);  // served from the queue
      Request r5b = t.Irecv(0, 5, got_b.data(), 16);
      ASSERT_TRUE(r5a->done() && r5b->done());
      ASSERT_TRUE(t.Wait(r5a, Soon()).ok());
      ASSERT_TRUE(t.Wait(r5b, Soon()).ok());
      EXPECT_TRUE(got_a == a);
      EXPECT_TRUE(got_b == b);
      EXPECT_TRUE(got_c == c);
    }
  });
}

// Set-aside messages take pooled buffers: a small message after a large one
// reuses the large buffer and is still delivered, and checked, by its own size.
TEST(ShmTransport, SetAsideBuffersAreReusedBySize) {
  RunRanks(2, UniqueJobId("pool"), [&](Transport& t) {
    const size_t big = 3 * kShmSlotBytes + 5;
    std::vector<uint8_t> a = Filled(big, 1), b = Filled(16, 2), c = Filled(100, 3);
    if (t.rank() == 0) {
      Request s[] = {t.Isend(1, 5, a.data(), big), t.Isend(1, 9, c.data(), 100),
                     t.Isend(1, 6, b.data(), 16),  t.Isend(1, 9, c.data(), 100),
                     t.Isend(1, 7, b.data(), 16),  t.Isend(1, 9, c.data(), 100)};
      for (auto& r : s) ASSERT_TRUE(t.Wait(r, Soon()).ok());
    } else {
      std::vector<uint8_t> got_a(big), got_b(16), got_c(100);
      Request r9 = t.Irecv(0, 9, got_c.data(), 100);  // the big one is set aside
      ASSERT_TRUE(t.Wait(r9, Soon()).ok());
      Request r5 = t.Irecv(0, 5, got_a.data(), big);  // served, its buffer pooled
      ASSERT_TRUE(t.Wait(r5, Soon()).ok());
      EXPECT_TRUE(got_a == a);
      r9 = t.Irecv(0, 9, got_c.data(), 100);  // the 16-byte one is set aside
      ASSERT_TRUE(t.Wait(r9, Soon()).ok());
      Request r6 = t.Irecv(0, 6, got_b.data(), 16);
      ASSERT_TRUE(t.Wait(r6, Soon()).ok());
      EXPECT_TRUE(got_b == b);
      r9 = t.Irecv(0, 9, got_c.data(), 100);
      ASSERT_TRUE(t.Wait(r9, Soon()).ok());
      EXPECT_TRUE(got_c == c);
      std::vector<uint8_t> wrong(17);
      Request r7 = t.Irecv(0, 7, wrong.data(), 17);  // 16 were sent
      Status st = t.Wait(r7, Soon());
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
      EXPECT_NE(st.message().find("sent 16 bytes but"), std::string::npos) << st.message();
    }
  });
}

TEST(ShmTransport, ReversedTagOrderManyTimes) {
  RunRanks(2, UniqueJobId("reverse"), [&](Transport& t) {
    for (size_t i = 0; i < 50; ++i) {
      const size_t n1 = (i % 3) * kShmSlotBytes + i, n2 = 8 * (i % 5);
      std::vector<uint8_t> m1 = Filled(n1, i), m2 = Filled(n2, i + 1);
      if (t.rank() == 0) {
        Request s1 = t.Isend(1, 2 * i, m1.data(), n1), s2 = t.Isend(1, 2 * i + 1, m2.data(), n2);
        ASSERT_TRUE(t.Wait(s1, Soon()).ok());
        ASSERT_TRUE(t.Wait(s2, Soon()).ok());
      } else {
        std::vector<uint8_t> g1(n1), g2(n2);
        Request r2 = t.Irecv(0, 2 * i + 1, g2.data(), n2);
        Request r1 = t.Irecv(0, 2 * i, g1.data(), n1);
        ASSERT_TRUE(t.Wait(r2, Soon()).ok());
        ASSERT_TRUE(t.Wait(r1, Soon()).ok());
        EXPECT_TRUE(g1 == m1 && g2 == m2) << "round " << i;
      }
    }
  });
}

TEST(ShmTransport, SizeMismatchFailsTheReceiveAndKeepsTheChannel) {
  RunRanks(2, UniqueJobId("mismatch"), [&](Transport& t) {
    std::vector<uint8_t> big = Filled(kShmSlotBytes * 2 + 1, 0), small = Filled(8, 1);
    if (t.rank() == 0) {
      Request s[] = {t.Isend(1, 1, small.data(), 8), t.Isend(1, 2, big.data(), big.size()),
                     t.Isend(1, 3, small.data(), 8)};
      for (auto& r : s) EXPECT_TRUE(t.Wait(r, Soon()).ok());  // the sender cannot know
    } else {
      std::vector<uint8_t> in(big.size());
      Status st = t.Wait(t.Irecv(0, 1, in.data(), 4), Soon());
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(st.message().find("rank 0 sent 8 bytes but"), std::string::npos) << st.message();
      EXPECT_NE(st.message().find("rank 1 expected 4 bytes (call 0, phase 0, step 0, "
                                  "segment 1 of context 0)"),
                std::string::npos)
          << st.message();
      st = t.Wait(t.Irecv(0, 2, in.data(), kShmSlotBytes), Soon());  // multi-slot, discarded
      EXPECT_NE(st.message().find("expected 256 KiB (262144 bytes)"), std::string::npos)
          << st.message();
      ASSERT_TRUE(t.Wait(t.Irecv(0, 3, in.data(), 8), Soon()).ok());
      EXPECT_EQ(std::memcmp(in.data(), small.data(), 8), 0);
    }
  });
}

TEST(ShmTransport, ManyThreadsInARing) {
  const int n = 8, rounds = 200;
  std::vector<int> errors(n, 0);
  RunRanks(n, UniqueJobId("ring"), [&](Transport& t) {
    const int r = t.rank();
    for (int i = 0; i < rounds; ++i) {
      int out = r * 1000 + i, in = -1;
      Request rq = t.Irecv((r - 1 + n) % n, static_cast<Tag>(i), &in, 4);
      Request sq = t.Isend((r + 1) % n, static_cast<Tag>(i), &out, 4);
      if (!t.Wait(rq, Soon()).ok() || !t.Wait(sq, Soon()).ok()) ++errors[static_cast<size_t>(r)];
      if (in != ((r - 1 + n) % n) * 1000 + i) ++errors[static_cast<size_t>(r)];
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], 0) << "rank " << r;
}

TEST(ShmTransport, InvalidPeerIsAnError) {
  RunRanks(2, UniqueJobId("peer"), [&](Transport& t) {
    int x = 0;
    EXPECT_EQ(t.Wait(t.Isend(5, 0, &x, 4), Soon()).code(), StatusCode::kInvalidArgument);
    Status st = t.Wait(t.Irecv(t.rank(), 0, &x, 4), Soon());
    EXPECT_NE(st.message().find("invalid peer " + std::to_string(t.rank())), std::string::npos);
  });
}

}  // namespace
}  // namespace hora
