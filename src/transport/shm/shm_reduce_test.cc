// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// IrecvReduce over shm: results, and that the reduction reads straight
// from the peer's mapped channel (no staging copy), single copy on or off:
// a receive that folds declines a message sent direct, which then comes
// through the slots.
#include <barrier>
#include <mutex>
#include <set>

#include "support/shm_test_util.h"

namespace hora {
namespace {

using shm_test::MappingOf;
using shm_test::RunRanks;
using shm_test::Soon;
using shm_test::UniqueJobId;

// Where the reductions of the test read from (the receiving thread's view).
std::mutex g_mu;
std::set<std::string> g_sources;
size_t g_calls = 0;

template <typename T>
void Add(DataType, ReduceOp op, void* dst, const void* src, size_t count) {
  EXPECT_EQ(op, ReduceOp::kSum);
  for (size_t i = 0; i < count; ++i) static_cast<T*>(dst)[i] += static_cast<const T*>(src)[i];
  std::lock_guard<std::mutex> lock(g_mu);
  g_sources.insert(MappingOf(src));
  ++g_calls;
}

// `single_copy`: ShmOptions::single_copy_bytes of both ranks.
template <typename T>
void CheckReduce(DataType dtype, size_t count, bool recv_first, size_t single_copy = 0) {
  const std::string job = UniqueJobId("reduce");
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_sources.clear();
    g_calls = 0;
  }
  std::barrier sync(2);
  RunRanks(
      2, job,
      [&](Transport& t) {
        if (t.rank() == 0) {
          std::vector<T> src(count);
          for (size_t i = 0; i < count; ++i) src[i] = static_cast<T>(i % 1000);
          if (recv_first) sync.arrive_and_wait();
          Request s = t.Isend(1, 9, src.data(), count * sizeof(T));
          if (!recv_first) sync.arrive_and_wait();
          ASSERT_TRUE(t.Wait(s, Soon()).ok());
        } else {
          std::vector<T> dst(count);
          for (size_t i = 0; i < count; ++i) dst[i] = static_cast<T>(3 * (i % 7));
          if (!recv_first) sync.arrive_and_wait();
          Request r =
              t.IrecvReduce(0, 9, dst.data(), count, ReduceSpec{dtype, ReduceOp::kSum, &Add<T>});
          if (recv_first) sync.arrive_and_wait();
          ASSERT_TRUE(t.Wait(r, Soon()).ok());
          size_t wrong = 0;
          for (size_t i = 0; i < count; ++i) {
            if (dst[i] != static_cast<T>(i % 1000 + 3 * (i % 7))) ++wrong;
          }
          EXPECT_EQ(wrong, 0u) << DataTypeName(dtype) << " count " << count;
        }
      },
      [&](int) { return shm_test::Options(single_copy); });
  std::lock_guard<std::mutex> lock(g_mu);
  const size_t slots = (count * sizeof(T) + kShmSlotBytes - 1) / kShmSlotBytes;
  // Posted first or not, the message waits in the ring for its receive (it
  // is set aside only for a receive of another tag), so every slot is
  // reduced in place, straight from the channel segment rank 0 -> 1.
  EXPECT_EQ(g_calls, slots);
  ASSERT_EQ(g_sources.size(), 1u);
  EXPECT_NE(g_sources.begin()->find("/dev/shm/hora-" + job + "-0-1"), std::string::npos)
      << *g_sources.begin() << " (" << count * sizeof(T) << " bytes, single copy from "
      << single_copy << ")";
}

TEST(ShmReduce, Float32SmallAndManySlotsBothOrders) {
  for (bool recv_first : {true, false}) {
    CheckReduce<float>(DataType::kFloat32, 1, recv_first);
    CheckReduce<float>(DataType::kFloat32, 1000, recv_first);
    CheckReduce<float>(DataType::kFloat32, 10 * kShmSlotBytes / 4 + 17, recv_first);
  }
}

TEST(ShmReduce, Int64ManySlotsBothOrders) {
  for (bool recv_first : {true, false}) {
    CheckReduce<int64_t>(DataType::kInt64, 3, recv_first);
    CheckReduce<int64_t>(DataType::kInt64, 20 * kShmSlotBytes / 8 + 1, recv_first);
  }
}

TEST(ShmReduce, AMessageSentDirectComesThroughTheSlotsToAFold) {
  SKIP_WHERE_THE_KERNEL_FORBIDS_READS();
  for (bool recv_first : {true, false}) {
    CheckReduce<float>(DataType::kFloat32, 1000, recv_first, 4096);  // below: slots
    CheckReduce<float>(DataType::kFloat32, 1024, recv_first, 4096);  // exactly the threshold
    CheckReduce<float>(DataType::kFloat32, 10 * kShmSlotBytes / 4 + 17, recv_first, 4096);
    CheckReduce<int64_t>(DataType::kInt64, 20 * kShmSlotBytes / 8 + 1, recv_first, 4096);
  }
}

TEST(ShmReduce, SizeMismatchLeavesTheDestinationAlone) {
  RunRanks(2, UniqueJobId("reduce-mismatch"), [&](Transport& t) {
    std::vector<int64_t> v(4, 5);
    if (t.rank() == 0) {
      ASSERT_TRUE(t.Wait(t.Isend(1, 1, v.data(), 24), Soon()).ok());
    } else {
      Request r = t.IrecvReduce(0, 1, v.data(), 4,
                                ReduceSpec{DataType::kInt64, ReduceOp::kSum, &Add<int64_t>});
      Status st = t.Wait(r, Soon());
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(st.message().find("rank 0 sent 24 bytes"), std::string::npos) << st.message();
      EXPECT_EQ(v, std::vector<int64_t>(4, 5));
    }
  });
}

}  // namespace
}  // namespace hora
