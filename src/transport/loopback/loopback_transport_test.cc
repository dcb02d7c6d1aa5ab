// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/loopback/loopback_transport.h"

#include "transport/tag_layout.h"

#include <gtest/gtest.h>

#include <thread>

namespace hora {
namespace {

TimePoint Soon() { return Clock::now() + std::chrono::seconds(10); }

TEST(Loopback, SendBeforeAndAfterReceiveIsPosted) {
  auto hub = LoopbackHub::Create(2);
  auto a = hub->Connect(0);
  auto b = hub->Connect(1);
  int x = 42, y = 0;
  Request s = a->Isend(1, 7, &x, sizeof x);  // unexpected: no receive yet
  EXPECT_FALSE(s->done());                   // rendezvous: completes on receipt
  Request r = b->Irecv(0, 7, &y, sizeof y);
  ASSERT_TRUE(r->Wait(Soon()).ok());
  ASSERT_TRUE(s->Wait(Soon()).ok());
  EXPECT_EQ(y, 42);

  int z = 0;
  Request r2 = b->Irecv(0, 8, &z, sizeof z);  // posted first
  Request s2 = a->Isend(1, 8, &x, sizeof x);
  ASSERT_TRUE(r2->Wait(Soon()).ok());
  EXPECT_EQ(z, 42);
}

TEST(Loopback, SameTagKeepsOrderDifferentTagsMatchByTag) {
  auto hub = LoopbackHub::Create(2);
  auto a = hub->Connect(0);
  auto b = hub->Connect(1);
  int v[3] = {1, 2, 3}, got[3] = {};
  Request s0 = a->Isend(1, 5, &v[0], 4);
  Request s1 = a->Isend(1, 5, &v[1], 4);
  Request s2 = a->Isend(1, 6, &v[2], 4);
  Request r2 = b->Irecv(0, 6, &got[2], 4);
  Request r0 = b->Irecv(0, 5, &got[0], 4);
  Request r1 = b->Irecv(0, 5, &got[1], 4);
  for (auto* r : {&r0, &r1, &r2}) ASSERT_TRUE((*r)->Wait(Soon()).ok());
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[1], 2);
  EXPECT_EQ(got[2], 3);
}

TEST(Loopback, ALostRankFailsWhatIsPendingAndWhatComesAfterNamingIt) {
  auto hub = LoopbackHub::Create(3);
  auto a = hub->Connect(0);
  auto b = hub->Connect(1);
  auto c = hub->Connect(2);
  int x = 1, y = 0, z = 0;
  EXPECT_TRUE(a->LostPeer().ok());
  Request posted = a->Irecv(1, 3, &y, sizeof y);  // pending when rank 1 goes
  Request unexpected = c->Isend(0, 4, &x, sizeof x);
  hub->Lose(1);
  for (Transport* t : {a.get(), b.get(), c.get()}) {
    const Status lost = t->LostPeer();
    EXPECT_EQ(lost.code(), StatusCode::kUnavailable);
    EXPECT_NE(lost.message().find("rank 1 was lost"), std::string::npos) << lost.ToString();
  }
  for (Request* r : {&posted, &unexpected}) {
    const Status st = (*r)->Wait(Soon());
    EXPECT_NE(st.message().find("rank 1 was lost"), std::string::npos) << st.ToString();
  }
  // After: between the ranks left too, as a TCP transport fails them.
  Request s = c->Isend(0, 5, &x, sizeof x);
  Request r = a->Irecv(2, 5, &z, sizeof z);
  EXPECT_FALSE(s->Wait(Soon()).ok());
  EXPECT_FALSE(r->Wait(Soon()).ok());
  EXPECT_EQ(z, 0);
}

TEST(Loopback, SizeMismatchFailsBothSidesNamingSizes) {
  auto hub = LoopbackHub::Create(2);
  auto a = hub->Connect(0);
  auto b = hub->Connect(1);
  char buf[16] = {};
  // The tag as collectives lay it out (tag_layout.h), read back in the error.
  using namespace tag_layout;
  const Tag tag = (uint64_t{4} << kContextShift) | (uint64_t{5} << kSequenceShift) |
                  (uint64_t{1} << kPhaseShift) | (uint64_t{3} << kStepShift) | 2;
  Request s = a->Isend(1, tag, buf, 16);
  Request r = b->Irecv(0, tag, buf, 8);
  Status rs = r->Wait(Soon()), ss = s->Wait(Soon());
  EXPECT_FALSE(rs.ok());
  EXPECT_FALSE(ss.ok());
  EXPECT_NE(rs.message().find("rank 0 sent 16 bytes"), std::string::npos) << rs.message();
  EXPECT_NE(rs.message().find("rank 1 expected 8 bytes (call 5, phase 1, step 3, segment 2 of "
                              "context 4)"),
            std::string::npos)
      << rs.message();
}

TEST(Loopback, WaitIsBoundedAndCancelReleasesTheBuffer) {
  auto hub = LoopbackHub::Create(2);
  auto a = hub->Connect(0);
  auto b = hub->Connect(1);
  int y = 0;
  Request r = b->Irecv(0, 3, &y, sizeof y);
  Status st = r->Wait(Clock::now() + std::chrono::milliseconds(20));
  EXPECT_EQ(st.code(), StatusCode::kTimeout);
  EXPECT_NE(st.message().find("receiving 4 B from rank 0"), std::string::npos) << st.message();
  b->Cancel(r);
  EXPECT_TRUE(r->done());
  // A late send must not land in the cancelled buffer.
  int x = 99;
  Request s = a->Isend(1, 3, &x, sizeof x);
  EXPECT_FALSE(s->done());
  EXPECT_EQ(y, 0);
  a->Cancel(s);
  EXPECT_EQ(s->status().code(), StatusCode::kAborted);
}

TEST(Loopback, InvalidPeerIsAnError) {
  auto hub = LoopbackHub::Create(2);
  auto a = hub->Connect(0);
  int x = 0;
  Request s = a->Isend(5, 0, &x, 4);
  EXPECT_EQ(s->Wait(Soon()).code(), StatusCode::kInvalidArgument);
  Request t = a->Isend(0, 0, &x, 4);
  EXPECT_NE(t->Wait(Soon()).message().find("invalid peer 0"), std::string::npos);
}

TEST(Loopback, ManyThreadsExchangeConcurrently) {
  const int n = 8, rounds = 200;
  auto hub = LoopbackHub::Create(n);
  std::vector<std::thread> threads;
  std::vector<int> errors(n, 0);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto t = hub->Connect(r);
      for (int i = 0; i < rounds; ++i) {
        int out = r * 1000 + i, in = -1;
        Request rq = t->Irecv((r - 1 + n) % n, static_cast<Tag>(i), &in, 4);
        Request sq = t->Isend((r + 1) % n, static_cast<Tag>(i), &out, 4);
        if (!rq->Wait(Soon()).ok() || !sq->Wait(Soon()).ok()) ++errors[static_cast<size_t>(r)];
        if (in != ((r - 1 + n) % n) * 1000 + i) ++errors[static_cast<size_t>(r)];
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], 0) << "rank " << r;
}

}  // namespace
}  // namespace hora

namespace hora {
namespace {

void AddInt32(DataType, ReduceOp, void* dst, const void* src, size_t count) {
  for (size_t i = 0; i < count; ++i)
    static_cast<int32_t*>(dst)[i] += static_cast<const int32_t*>(src)[i];
}

TEST(Loopback, IrecvReduceFoldsIntoDestinationEitherOrder) {
  auto hub = LoopbackHub::Create(2);
  auto a = hub->Connect(0);
  auto b = hub->Connect(1);
  const ReduceSpec spec{DataType::kInt32, ReduceOp::kSum, &AddInt32};
  int32_t src[3] = {1, 2, 3}, dst[3] = {10, 20, 30};
  Request r = b->IrecvReduce(0, 1, dst, 3, spec);  // posted first
  Request s = a->Isend(1, 1, src, sizeof src);
  ASSERT_TRUE(r->Wait(Soon()).ok());
  ASSERT_TRUE(s->Wait(Soon()).ok());
  EXPECT_EQ(dst[0], 11);
  EXPECT_EQ(dst[2], 33);
  Request s2 = a->Isend(1, 2, src, sizeof src);  // sent first
  Request r2 = b->IrecvReduce(0, 2, dst, 3, spec);
  ASSERT_TRUE(r2->Wait(Soon()).ok());
  EXPECT_EQ(dst[1], 24);
  // A send of another size fails both sides.
  Request s3 = a->Isend(1, 3, src, 8);
  Request r3 = b->IrecvReduce(0, 3, dst, 3, spec);
  EXPECT_EQ(r3->Wait(Soon()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dst[0], 12);  // untouched by the failed receive
}

}  // namespace
}  // namespace hora
