// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Not a test: a measurement of the shm transport between two threads, run by
//   hora_tests --gtest_also_run_disabled_tests --gtest_filter='ShmBench.*'
// It prints the 8-byte ping-pong latency (half the round trip, median of
// batches) and the one-way bandwidth of 64 MiB messages (Isend -> Irecv, and
// Isend -> IrecvReduce of float32), each timed from the send until an 8-byte
// acknowledgement arrives back.
#include <algorithm>
#include <barrier>
#include <cstdio>

#include "support/shm_test_util.h"

namespace hora {
namespace {

using shm_test::RunRanks;
using shm_test::Soon;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void SumF32(DataType, ReduceOp, void* dst, const void* src, size_t count) {
  auto* d = static_cast<float*>(dst);
  const auto* s = static_cast<const float*>(src);
  for (size_t i = 0; i < count; ++i) d[i] += s[i];
}

TEST(ShmBench, DISABLED_PingPongLatencyAndBandwidth) {
  RunRanks(2, shm_test::UniqueJobId("bench"), [&](Transport& t) {
    const int peer = 1 - t.rank();
    uint64_t word = 0;
    auto ping = [&] {
      if (t.rank() == 0) {
        EXPECT_TRUE(t.Wait(t.Isend(peer, 1, &word, 8), Soon()).ok());
        EXPECT_TRUE(t.Wait(t.Irecv(peer, 1, &word, 8), Soon()).ok());
      } else {
        EXPECT_TRUE(t.Wait(t.Irecv(peer, 1, &word, 8), Soon()).ok());
        EXPECT_TRUE(t.Wait(t.Isend(peer, 1, &word, 8), Soon()).ok());
      }
    };
    const int batch = 2000;
    std::vector<double> lat_us;
    for (int b = 0; b < 21; ++b) {
      const TimePoint start = Clock::now();
      for (int i = 0; i < batch; ++i) ping();
      lat_us.push_back(DurationToSeconds(Clock::now() - start) * 1e6 / batch / 2);
    }
    lat_us.erase(lat_us.begin());  // warm-up

    const size_t bytes = size_t{64} << 20;
    std::vector<float> buf(bytes / 4, 1.0f);
    for (int reduce = 0; reduce < 2; ++reduce) {
      std::vector<double> gbps;
      for (int rep = 0; rep < 11; ++rep) {
        const TimePoint start = Clock::now();
        if (t.rank() == 0) {
          EXPECT_TRUE(t.Wait(t.Isend(peer, 2, buf.data(), bytes), Soon()).ok());
          EXPECT_TRUE(t.Wait(t.Irecv(peer, 3, &word, 8), Soon()).ok());
          gbps.push_back(static_cast<double>(bytes) / DurationToSeconds(Clock::now() - start) /
                         1e9);
        } else {
          Request r = reduce
                          ? t.IrecvReduce(peer, 2, buf.data(), bytes / 4,
                                          ReduceSpec{DataType::kFloat32, ReduceOp::kSum, &SumF32})
                          : t.Irecv(peer, 2, buf.data(), bytes);
          EXPECT_TRUE(t.Wait(r, Soon()).ok());
          EXPECT_TRUE(t.Wait(t.Isend(peer, 3, &word, 8), Soon()).ok());
        }
      }
      if (t.rank() == 0) {
        gbps.erase(gbps.begin());
        std::printf("shm 64 MiB one-way %s: median %.2f GB/s, best %.2f GB/s\n",
                    reduce ? "IrecvReduce(f32 sum)" : "Irecv", Median(gbps),
                    *std::max_element(gbps.begin(), gbps.end()));
      }
    }
    if (t.rank() == 0) {
      std::printf("shm 8-byte ping-pong: median %.2f us one-way, best batch %.2f us\n",
                  Median(lat_us), *std::min_element(lat_us.begin(), lat_us.end()));
    }
  });
}

}  // namespace
}  // namespace hora
