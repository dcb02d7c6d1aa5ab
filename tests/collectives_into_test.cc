// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The `output` forms of allgather, reducescatter and alltoall: results land
// in the caller's buffer (any shape with the right element count), nothing
// is written past it, one buffer serves several calls in a row, and an
// output that does not fit fails only its own rank, naming both shapes,
// while the other ranks finish with correct results. References are built
// from the other ranks' inputs in the test.
#include <gtest/gtest.h>

#include <numeric>

#include "support/reference.h"
#include "support/thread_ranks.h"

namespace hora::testing {
namespace {

constexpr uint8_t kGuard = 0xA5;
constexpr size_t kGuardBytes = 64;

// A caller's output buffer: `bytes` of payload followed by guard bytes.
struct Output {
  explicit Output(size_t bytes) : buf(bytes + kGuardBytes, kGuard), bytes(bytes) {}
  TensorView Flat(DataType dtype) {
    return TensorView::Flat(buf.data(), dtype, bytes / DataTypeSize(dtype));
  }
  bool GuardIntact() const {
    for (size_t i = bytes; i < buf.size(); ++i)
      if (buf[i] != kGuard) return false;
    return true;
  }
  bool Untouched() const {
    for (uint8_t b : buf)
      if (b != kGuard) return false;
    return true;
  }
  std::vector<uint8_t> buf;
  size_t bytes;
};

class CollectivesInto : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesInto, AllgatherIntoReusedBuffer) {
  const int n = GetParam();
  ThreadRanks job(n, TestSettings());
  for (DataType dtype :
       {DataType::kUInt8, DataType::kFloat16, DataType::kFloat32, DataType::kFloat64}) {
    const size_t esize = DataTypeSize(dtype);
    for (int64_t base_rows : {0, 1, 7, 40000}) {
      const int64_t cols = 3;
      auto rows_of = [&](int r) { return base_rows == 0 ? 0 : base_rows + r % 3; };
      int64_t total = 0;
      for (int r = 0; r < n; ++r) total += rows_of(r);
      const size_t out_bytes = static_cast<size_t>(total * cols) * esize;
      std::vector<Output> out(static_cast<size_t>(n), Output(out_bytes));
      // Two calls with different inputs into the same buffers: the second
      // result must replace the first everywhere.
      for (uint64_t salt : {1u, 2u}) {
        std::vector<std::vector<uint8_t>> in(static_cast<size_t>(n));
        std::vector<uint8_t> expected;
        for (int r = 0; r < n; ++r) {
          in[static_cast<size_t>(r)] =
              BytePattern(static_cast<size_t>(rows_of(r) * cols) * esize, r, salt * 977);
          expected.insert(expected.end(), in[static_cast<size_t>(r)].begin(),
                          in[static_cast<size_t>(r)].end());
        }
        auto st = job.Run([&](int r, Session& s) {
          TensorView v(in[static_cast<size_t>(r)].data(), dtype, {rows_of(r), cols});
          return s.Allgather(v, out[static_cast<size_t>(r)].Flat(dtype));
        });
        for (int r = 0; r < n; ++r) {
          ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].ToString();
          const Output& o = out[static_cast<size_t>(r)];
          EXPECT_TRUE(SameBytes(o.buf.data(), expected.data(), expected.size()))
              << DataTypeName(dtype) << " rows " << base_rows << " call " << salt << " rank " << r;
          EXPECT_TRUE(o.GuardIntact()) << "allgather wrote past its output on rank " << r;
        }
      }
    }
  }
}

TEST_P(CollectivesInto, ReducescatterIntoReusedBuffer) {
  const int n = GetParam();
  ThreadRanks job(n, TestSettings());
  for (DataType dtype : {DataType::kInt32, DataType::kFloat32, DataType::kBFloat16}) {
    const size_t esize = DataTypeSize(dtype);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin}) {
      for (int64_t dim0 : {int64_t{0}, int64_t{1}, int64_t{n} * 3 + 1, int64_t{n} * 20000 + 3}) {
        const int64_t cols = 2;
        const size_t count = static_cast<size_t>(dim0 * cols);
        auto rows_of = [&](int r) { return dim0 / n + (r < dim0 % n ? 1 : 0); };
        std::vector<Output> out;
        for (int r = 0; r < n; ++r)
          out.emplace_back(static_cast<size_t>(rows_of(r) * cols) * esize);
        for (uint64_t seed : {11u, 12u}) {
          std::vector<std::vector<uint8_t>> in(static_cast<size_t>(n),
                                               std::vector<uint8_t>(count * esize));
          std::vector<const void*> ptrs;
          for (int r = 0; r < n; ++r) {
            FillInput(dtype, op, in[static_cast<size_t>(r)].data(), count, seed, r);
            ptrs.push_back(in[static_cast<size_t>(r)].data());
          }
          const Expected expected = ReferenceAllreduce(dtype, {op}, ptrs, count);
          auto st = job.Run([&](int r, Session& s) {
            TensorView v(in[static_cast<size_t>(r)].data(), dtype, {dim0, cols});
            // A 2-d output for this one: any shape with the element count fits.
            TensorView o(out[static_cast<size_t>(r)].buf.data(), dtype, {rows_of(r), cols});
            return s.Reducescatter(v, o, {op});
          });
          int64_t row_offset = 0;
          for (int r = 0; r < n; ++r) {
            ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].ToString();
            const std::string diff = Compare(expected, out[static_cast<size_t>(r)].buf.data(),
                                             static_cast<size_t>(row_offset * cols),
                                             static_cast<size_t>(rows_of(r) * cols));
            EXPECT_TRUE(diff.empty()) << DataTypeName(dtype) << " " << ReduceOpName(op) << " dim0 "
                                      << dim0 << " seed " << seed << " rank " << r << ": " << diff;
            EXPECT_TRUE(out[static_cast<size_t>(r)].GuardIntact()) << "rank " << r;
            row_offset += rows_of(r);
          }
        }
      }
    }
  }
}

TEST_P(CollectivesInto, AlltoallIntoReusedBuffer) {
  const int n = GetParam();
  ThreadRanks job(n, TestSettings());
  for (DataType dtype : {DataType::kUInt8, DataType::kFloat32}) {
    const size_t esize = DataTypeSize(dtype);
    for (int scale : {0, 1, 3000}) {
      const int64_t cols = 2;
      const size_t row_bytes = static_cast<size_t>(cols) * esize;
      auto rows = [&](int from, int to) -> int64_t { return ((from + 2 * to) % 3) * scale; };
      std::vector<Output> out;
      for (int r = 0; r < n; ++r) {
        int64_t received = 0;
        for (int p = 0; p < n; ++p) received += rows(p, r);
        out.emplace_back(static_cast<size_t>(received) * row_bytes);
      }
      for (uint64_t salt : {5u, 6u}) {
        std::vector<std::vector<uint8_t>> in;
        std::vector<std::vector<int64_t>> splits;
        MakeAlltoallInputs(n, rows, row_bytes, salt, &in, &splits);
        std::vector<std::vector<int64_t>> received(static_cast<size_t>(n));
        auto st = job.Run([&](int r, Session& s) {
          auto& sp = splits[static_cast<size_t>(r)];
          const int64_t total = std::accumulate(sp.begin(), sp.end(), int64_t{0});
          TensorView v(in[static_cast<size_t>(r)].data(), dtype, {total, cols});
          return s.Alltoall(v, sp, out[static_cast<size_t>(r)].Flat(dtype),
                            &received[static_cast<size_t>(r)]);
        });
        for (int r = 0; r < n; ++r) {
          ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].ToString();
          const std::vector<uint8_t> expected = AlltoallExpected(n, rows, row_bytes, in, r);
          for (int p = 0; p < n; ++p)
            EXPECT_EQ(received[static_cast<size_t>(r)][static_cast<size_t>(p)], rows(p, r));
          const Output& o = out[static_cast<size_t>(r)];
          EXPECT_TRUE(SameBytes(o.buf.data(), expected.data(), expected.size()))
              << "alltoall " << DataTypeName(dtype) << " scale " << scale << " rank " << r;
          EXPECT_TRUE(o.GuardIntact()) << "rank " << r;
        }
      }
    }
  }
}

// Rank `bad` passes an output one element short (or of another dtype): it
// alone fails, naming its output and the result's shape, its buffer is not
// written, and the other ranks (none in a world of one) get correct results;
// the job goes on.
TEST_P(CollectivesInto, MisfitOutputFailsOnlyItsRank) {
  const int n = GetParam();
  ThreadRanks job(n, TestSettings());
  const int bad = n - 1;
  const int64_t rows = 5, cols = 2;
  const size_t count = static_cast<size_t>(rows * cols);
  std::vector<std::vector<float>> in(static_cast<size_t>(n), std::vector<float>(count * n));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < in[static_cast<size_t>(r)].size(); ++i)
      in[static_cast<size_t>(r)][i] = static_cast<float>(r * 1000 + static_cast<int>(i));

  enum class Kind { kAllgather, kReducescatter, kAlltoall };
  for (Kind kind : {Kind::kAllgather, Kind::kReducescatter, Kind::kAlltoall}) {
    for (bool wrong_dtype : {false, true}) {
      // Every form below yields n * count floats for allgather and alltoall
      // (input n*rows rows for alltoall: count per peer) and `count` for
      // reducescatter.
      const size_t want = kind == Kind::kReducescatter ? count : count * static_cast<size_t>(n);
      std::vector<Output> out;
      for (int r = 0; r < n; ++r) {
        const size_t elems = r == bad && !wrong_dtype ? want - 1 : want;
        out.emplace_back(elems * sizeof(float));
      }
      auto st = job.Run([&](int r, Session& s) {
        float* data = in[static_cast<size_t>(r)].data();
        const DataType odt = r == bad && wrong_dtype ? DataType::kInt32 : DataType::kFloat32;
        TensorView o = out[static_cast<size_t>(r)].Flat(odt);
        switch (kind) {
          case Kind::kAllgather:
            return s.Allgather(TensorView(data, DataType::kFloat32, {rows, cols}), o);
          case Kind::kReducescatter:
            return s.Reducescatter(TensorView(data, DataType::kFloat32, {rows * n, cols}), o);
          case Kind::kAlltoall:
            return s.Alltoall(TensorView(data, DataType::kFloat32, {rows * n, cols}), {}, o);
        }
        return Status::Ok();
      });
      for (int r = 0; r < n; ++r) {
        const Status& s = st[static_cast<size_t>(r)];
        const Output& o = out[static_cast<size_t>(r)];
        if (r == bad) {
          EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
          EXPECT_NE(s.message().find("rank " + std::to_string(bad)), std::string::npos)
              << s.message();
          EXPECT_NE(s.message().find("does not fit the result float32["), std::string::npos)
              << s.message();
          EXPECT_TRUE(o.Untouched()) << "the misfit output was written";
          continue;
        }
        ASSERT_TRUE(s.ok()) << "rank " << r << ": " << s.ToString();
        const auto* got = reinterpret_cast<const float*>(o.buf.data());
        for (size_t i = 0; i < want; ++i) {
          float e = 0;
          if (kind == Kind::kAllgather) {
            e = in[i / count][i % count];
          } else if (kind == Kind::kReducescatter) {
            for (int p = 0; p < n; ++p) e += in[static_cast<size_t>(p)][r * count + i];
          } else {
            e = in[i / count][static_cast<size_t>(r) * count + i % count];
          }
          ASSERT_EQ(got[i], e) << "element " << i << " on rank " << r;
        }
      }
      // The job goes on.
      ExpectAllOk(job.Run([](int, Session& s) { return s.Barrier(); }));
    }
  }
}

// These collectives do not run in place: an output that overlaps the input
// fails that rank (naming both), and the input is left as it was.
TEST_P(CollectivesInto, OverlappingOutputFailsOnlyItsRank) {
  const int n = GetParam();
  ThreadRanks job(n, TestSettings());
  std::vector<std::vector<float>> buf(static_cast<size_t>(n), std::vector<float>(4 * n * n));
  auto st = job.Run([&](int r, Session& s) {
    auto& b = buf[static_cast<size_t>(r)];
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i);
    // Input: the first 2n floats; output: n*2n floats from the start (allgather's size).
    TensorView in(b.data(), DataType::kFloat32, {2 * n});
    TensorView out(b.data(), DataType::kFloat32, {2 * n * n});
    return s.Allgather(in, out);
  });
  for (int r = 0; r < n; ++r) {
    const Status& s = st[static_cast<size_t>(r)];
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("overlaps input float32["), std::string::npos) << s.message();
    EXPECT_EQ(buf[static_cast<size_t>(r)][1], 1.0f) << "the input was written";
  }
  ExpectAllOk(job.Run([](int, Session& s) { return s.Barrier(); }));
}

INSTANTIATE_TEST_SUITE_P(Worlds, CollectivesInto, ::testing::Values(1, 2, 3, 5, 8),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

}  // namespace
}  // namespace hora::testing
