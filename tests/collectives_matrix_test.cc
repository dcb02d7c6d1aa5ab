// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Allgather (uneven dim 0, every algorithm), broadcast (every root, every algorithm),
// reducescatter (even and uneven splits, every algorithm), alltoall (uneven splits, zero
// splits, every algorithm) and barrier, across world sizes, dtypes and sizes, each checked
// against a reference built from the other ranks' inputs.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <numeric>

#include "collectives/selector.h"
#include "support/reference.h"
#include "support/thread_ranks.h"

namespace hora::testing {
namespace {

class CollectivesMatrix : public ::testing::TestWithParam<int> {};

const DataType kSomeTypes[] = {DataType::kUInt8,    DataType::kInt32,   DataType::kFloat16,
                               DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64,
                               DataType::kInt64,    DataType::kBool};

TEST_P(CollectivesMatrix, AllgatherUnevenRowsEveryAlgorithm) {
  const int n = GetParam();
  for (const char* algo : {"ring", "shared_memory"}) {
    ThreadRanks job(n, TestSettings({{"HORA_ALLGATHER_ALGO", algo}}));
    for (DataType dtype : kSomeTypes) {
      const size_t esize = DataTypeSize(dtype);
      for (int64_t base_rows : {0, 1, 7, 1031, 65536}) {
        const int64_t cols = 3;
        auto rows_of = [&](int r) { return base_rows == 0 ? 0 : base_rows + r % 3; };  // uneven
        std::vector<std::vector<uint8_t>> in(static_cast<size_t>(n));
        for (int r = 0; r < n; ++r)
          in[static_cast<size_t>(r)] = BytePattern(static_cast<size_t>(rows_of(r) * cols) * esize,
                                                   r, static_cast<uint64_t>(base_rows));
        std::vector<uint8_t> expected;
        for (auto& v : in) expected.insert(expected.end(), v.begin(), v.end());
        std::vector<Tensor> out(static_cast<size_t>(n));
        auto st = job.Run([&](int r, Session& s) {
          TensorView v(in[static_cast<size_t>(r)].data(), dtype, {rows_of(r), cols});
          auto res = s.Allgather(v);
          if (!res.ok()) return res.status();
          out[static_cast<size_t>(r)] = std::move(res).value();
          return Status::Ok();
        });
        int64_t total = 0;
        for (int r = 0; r < n; ++r) total += rows_of(r);
        for (int r = 0; r < n; ++r) {
          ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].ToString();
          const Tensor& t = out[static_cast<size_t>(r)];
          ASSERT_EQ(t.shape(), (std::vector<int64_t>{total, cols})) << DataTypeName(dtype);
          ASSERT_EQ(t.num_bytes(), expected.size());
          EXPECT_TRUE(SameBytes(t.data(), expected.data(), expected.size()))
              << "allgather " << algo << " " << DataTypeName(dtype) << " rows " << base_rows
              << " rank " << r;
        }
      }
    }
  }
}

TEST_P(CollectivesMatrix, AllgatherShapeMismatchNamesEveryRank) {
  const int n = GetParam();
  if (n < 2) GTEST_SKIP() << "a mismatch needs two ranks";
  ThreadRanks job(n, TestSettings());
  std::vector<float> buf(64);
  auto st = job.Run([&](int r, Session& s) {
    TensorView v(buf.data(), DataType::kFloat32, {2, r == 1 ? 5 : 4});
    return s.Allgather(v).status();
  });
  for (int r = 0; r < n; ++r) {
    const Status& s = st[static_cast<size_t>(r)];
    EXPECT_EQ(s.code(), StatusCode::kMismatch) << s.ToString();
    EXPECT_NE(s.message().find("rank 0 float32[2, 4]"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("rank 1 float32[2, 5]"), std::string::npos) << s.message();
  }
  // The job goes on: a correct collective still works afterwards.
  auto ok = job.Run([&](int, Session& s) { return s.Barrier(); });
  for (const auto& s : ok) EXPECT_TRUE(s.ok()) << s.ToString();
}

// Ranks whose alltoall rows differ (dtype, or elements a row) would choose
// their algorithm by different splits' bytes: every rank fails alike with a
// Mismatch naming each rank's rows, and the job goes on.
TEST_P(CollectivesMatrix, AlltoallRowMismatchNamesEveryRank) {
  const int n = GetParam();
  if (n < 2) GTEST_SKIP() << "a mismatch needs two ranks";
  ThreadRanks job(n, TestSettings());
  std::vector<double> buf(static_cast<size_t>(8 * n));
  auto st = job.Run([&](int r, Session& s) {
    TensorView v(buf.data(), r == 1 ? DataType::kFloat64 : DataType::kFloat32,
                 {n, r == n - 1 && n > 2 ? 3 : 2});
    return s.Alltoall(v, {}).status();
  });
  for (int r = 0; r < n; ++r) {
    const Status& s = st[static_cast<size_t>(r)];
    EXPECT_EQ(s.code(), StatusCode::kMismatch) << s.ToString();
    EXPECT_NE(s.message().find("rank 0 float32 rows of 2 elements"), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("rank 1 float64 rows of 2 elements"), std::string::npos)
        << s.message();
  }
  auto ok = job.Run([&](int, Session& s) { return s.Barrier(); });
  for (const auto& s : ok) EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_P(CollectivesMatrix, BroadcastEveryRootEveryAlgorithm) {
  const int n = GetParam();
  for (const BroadcastAlgorithm& algo : kAllBroadcastAlgorithms) {
    ThreadRanks job(n, TestSettings({{"HORA_BROADCAST_ALGO", algo.name}}));
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{7}, size_t{1031}, size_t{4} << 20}) {
      for (int root = 0; root < n; ++root) {
        std::vector<std::vector<uint8_t>> data(static_cast<size_t>(n));
        for (int r = 0; r < n; ++r) data[static_cast<size_t>(r)] = BytePattern(bytes, r, bytes);
        const std::vector<uint8_t> expected = data[static_cast<size_t>(root)];
        auto st = job.Run([&](int r, Session& s) {
          TensorView v =
              TensorView::Flat(data[static_cast<size_t>(r)].data(), DataType::kUInt8, bytes);
          return s.Broadcast(v, root);
        });
        for (int r = 0; r < n; ++r) {
          ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].ToString();
          ASSERT_EQ(data[static_cast<size_t>(r)], expected)
              << algo.name << " bytes " << bytes << " root " << root << " rank " << r;
        }
        if (bytes > 4096 && root > 2) break;  // large messages: the first roots suffice
      }
    }
  }
}

TEST_P(CollectivesMatrix, ReducescatterEvenAndUnevenEveryAlgorithm) {
  const int n = GetParam();
  for (const ReducescatterAlgorithm& algo : kAllReducescatterAlgorithms) {
    ThreadRanks job(n, TestSettings({{"HORA_REDUCESCATTER_ALGO", algo.name}}));
    for (DataType dtype :
         {DataType::kInt32, DataType::kFloat32, DataType::kBFloat16, DataType::kInt8}) {
      const size_t esize = DataTypeSize(dtype);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
        // (A prescale with the average: each rank's block scaled where the
        // window's reduce-scatter reads it in place too.)
        const Reduction red{op, op == ReduceOp::kAverage ? 0.5 : 1.0,
                            op == ReduceOp::kSum ? 2.0 : 1.0};
        // dim0 values: 0, fewer rows than ranks, uneven, even, large.
        for (int64_t dim0 :
             {int64_t{0}, int64_t{1}, int64_t{n} * 3 + 1, int64_t{n} * 4, int64_t{n} * 4096 + 5}) {
          const int64_t cols = 2;
          const size_t count = static_cast<size_t>(dim0 * cols);
          std::vector<std::vector<uint8_t>> in(static_cast<size_t>(n),
                                               std::vector<uint8_t>(count * esize));
          std::vector<const void*> ptrs;
          for (int r = 0; r < n; ++r) {
            FillInput(dtype, op, in[static_cast<size_t>(r)].data(), count,
                      static_cast<uint64_t>(dim0) + 7, r);
            ptrs.push_back(in[static_cast<size_t>(r)].data());
          }
          const Expected expected = ReferenceAllreduce(dtype, red, ptrs, count);
          std::vector<Tensor> out(static_cast<size_t>(n));
          auto st = job.Run([&](int r, Session& s) {
            TensorView v(in[static_cast<size_t>(r)].data(), dtype, {dim0, cols});
            auto res = s.Reducescatter(v, red);
            if (!res.ok()) return res.status();
            out[static_cast<size_t>(r)] = std::move(res).value();
            return Status::Ok();
          });
          int64_t row_offset = 0;
          for (int r = 0; r < n; ++r) {
            ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].ToString();
            const int64_t rows = dim0 / n + (r < dim0 % n ? 1 : 0);
            ASSERT_EQ(out[static_cast<size_t>(r)].shape(), (std::vector<int64_t>{rows, cols}));
            const std::string diff =
                Compare(expected, out[static_cast<size_t>(r)].data(),
                        static_cast<size_t>(row_offset * cols), static_cast<size_t>(rows * cols));
            ASSERT_TRUE(diff.empty())
                << algo.name << " " << DataTypeName(dtype) << " " << ReduceOpName(op) << " dim0 "
                << dim0 << " rank " << r << ": " << diff;
            row_offset += rows;
          }
        }
      }
    }
  }
}

TEST_P(CollectivesMatrix, AlltoallUnevenSplitsEveryAlgorithm) {
  const int n = GetParam();
  for (const char* algo : {"pairwise", "shared_memory"}) {
    ThreadRanks job(n, TestSettings({{"HORA_ALLTOALL_ALGO", algo}}));
    for (DataType dtype : {DataType::kUInt8, DataType::kFloat32, DataType::kInt64}) {
      const size_t esize = DataTypeSize(dtype);
      for (int scale : {0, 1, 1000}) {
        const int64_t cols = 2;
        // Rank r sends (r + p) % 3 * scale rows to rank p; some splits are zero.
        auto rows = [&](int from, int to) -> int64_t { return ((from + to) % 3) * scale; };
        const size_t row_bytes = static_cast<size_t>(cols) * esize;
        std::vector<std::vector<uint8_t>> in;
        std::vector<std::vector<int64_t>> splits;
        MakeAlltoallInputs(n, rows, row_bytes, static_cast<uint64_t>(scale), &in, &splits);
        std::vector<Tensor> out(static_cast<size_t>(n));
        std::vector<std::vector<int64_t>> received(static_cast<size_t>(n));
        auto st = job.Run([&](int r, Session& s) {
          auto& sp = splits[static_cast<size_t>(r)];
          const int64_t total = std::accumulate(sp.begin(), sp.end(), int64_t{0});
          TensorView v(in[static_cast<size_t>(r)].data(), dtype, {total, cols});
          auto res = s.Alltoall(v, sp, &received[static_cast<size_t>(r)]);
          if (!res.ok()) return res.status();
          out[static_cast<size_t>(r)] = std::move(res).value();
          return Status::Ok();
        });
        for (int r = 0; r < n; ++r) {
          ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].ToString();
          const std::vector<uint8_t> expected = AlltoallExpected(n, rows, row_bytes, in, r);
          for (int p = 0; p < n; ++p)
            EXPECT_EQ(received[static_cast<size_t>(r)][static_cast<size_t>(p)], rows(p, r));
          ASSERT_EQ(out[static_cast<size_t>(r)].num_bytes(), expected.size());
          EXPECT_TRUE(
              SameBytes(out[static_cast<size_t>(r)].data(), expected.data(), expected.size()))
              << "alltoall " << algo << " " << DataTypeName(dtype) << " scale " << scale << " rank "
              << r;
        }
      }
    }
  }
}

TEST_P(CollectivesMatrix, BarrierHoldsEveryRankBack) {
  const int n = GetParam();
  ThreadRanks job(n, TestSettings());
  std::atomic<int> arrived{0};
  std::vector<int> seen(static_cast<size_t>(n), -1);
  auto st = job.Run([&](int r, Session& s) {
    if (r == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the late one
    arrived.fetch_add(1);
    Status b = s.Barrier();
    seen[static_cast<size_t>(r)] = arrived.load();
    return b;
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].ToString();
    EXPECT_EQ(seen[static_cast<size_t>(r)], n) << "rank " << r << " left the barrier early";
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, CollectivesMatrix, ::testing::Values(1, 2, 3, 4, 5, 7, 8, 16),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

}  // namespace
}  // namespace hora::testing
