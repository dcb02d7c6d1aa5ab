// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The engine's allgather, reducescatter and alltoall with ranks as threads:
// outputs Hora allocates, checked against values computed here from a
// formula; rows that differ between ranks and change between steps (the
// response cache must not replay another step's rows); mismatches; groups.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>

#include "support/thread_ranks.h"

namespace hora {
namespace {

using testing::ExpectAllOk;
using testing::TestSettings;
using testing::ThreadRanks;

constexpr auto kWait = std::chrono::seconds(60);
constexpr int64_t kCols = 3;

// Element (row i, column j) of rank r's input at step s.
double Value(int r, int64_t i, int64_t j, int s) {
  return r * 1000.0 + static_cast<double>(i) * 10.0 + static_cast<double>(j) + s * 0.5;
}

template <typename T>
std::vector<T> Rows(int r, int64_t rows, int s) {
  std::vector<T> v(static_cast<size_t>(rows * kCols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < kCols; ++j) v[static_cast<size_t>(i * kCols + j)] = Value(r, i, j, s);
  return v;
}

template <typename T>
Status Expect(const Tensor* out, const std::vector<T>& want, const std::string& what) {
  if (out == nullptr) return InternalError(what + ": no output");
  if (out->num_elements() != want.size()) {
    return InternalError(what + ": " + std::to_string(out->num_elements()) +
                         " elements, expected " + std::to_string(want.size()));
  }
  const T* got = static_cast<const T*>(out->data());
  for (size_t k = 0; k < want.size(); ++k) {
    if (got[k] != want[k]) {
      return InternalError(what + ": element " + std::to_string(k) + " is " +
                           std::to_string(static_cast<double>(got[k])) + ", expected " +
                           std::to_string(static_cast<double>(want[k])));
    }
  }
  return Status::Ok();
}

// Rows rank r gives at step s: differ by rank and step, and 0 sometimes.
int64_t RowsOf(int r, int s) { return (r * 3 + s * 2) % 5; }

class EngineShapes : public ::testing::TestWithParam<int> {};

TEST_P(EngineShapes, AllgatherWithRowsThatChangeEveryStep) {
  const int n = GetParam();
  ThreadRanks ranks(n, TestSettings());
  ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
    for (int step = 0; step < 6; ++step) {
      const int phase = step < 3 ? step : 0;  // steps 3-5 repeat rows (cache hits)
      auto mine = Rows<float>(rank, RowsOf(rank, phase), step);
      Handle h = s.AllgatherAsync(
          "ag", TensorView(mine.data(), DataType::kFloat32, {RowsOf(rank, phase), kCols}));
      HORA_RETURN_IF_ERROR(h.Wait(kWait));
      std::vector<float> want;
      for (int p = 0; p < n; ++p) {
        auto rows = Rows<float>(p, RowsOf(p, phase), step);
        want.insert(want.end(), rows.begin(), rows.end());
      }
      HORA_RETURN_IF_ERROR(Expect(h.output(), want, "step " + std::to_string(step)));
      int64_t total = 0;
      for (int p = 0; p < n; ++p) total += RowsOf(p, phase);
      if (h.output()->shape() != std::vector<int64_t>{total, kCols})
        return InternalError("allgather output shape");
    }
    if (s.engine_counters().cache_hits == 0) return InternalError("no cache hit");
    return Status::Ok();
  }));
}

TEST_P(EngineShapes, ReducescatterSumAndAverage) {
  const int n = GetParam();
  ThreadRanks ranks(n, TestSettings());
  ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
    for (int64_t dim0 : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{2 * n + 1}}) {
      for (int step = 0; step < 2; ++step) {
        auto mine = Rows<double>(rank, dim0, step);
        TensorView v(mine.data(), DataType::kFloat64, {dim0, kCols});
        Handle hs = s.ReducescatterAsync("rs" + std::to_string(dim0), v, {ReduceOp::kSum});
        Handle ha = s.ReducescatterAsync("ra" + std::to_string(dim0), v, {ReduceOp::kAverage});
        HORA_RETURN_IF_ERROR(hs.Wait(kWait));
        HORA_RETURN_IF_ERROR(ha.Wait(kWait));
        // My slice: dim0 / n rows, the first dim0 % n ranks one more.
        int64_t first = 0;
        for (int p = 0; p < rank; ++p) first += dim0 / n + (p < dim0 % n ? 1 : 0);
        const int64_t count = dim0 / n + (rank < dim0 % n ? 1 : 0);
        std::vector<double> sum, avg;
        for (int64_t i = first; i < first + count; ++i) {
          for (int64_t j = 0; j < kCols; ++j) {
            double t = 0;
            for (int p = 0; p < n; ++p) t += Value(p, i, j, step);
            sum.push_back(t);
            avg.push_back(t / n);
          }
        }
        const std::string what = "dim0 " + std::to_string(dim0);
        HORA_RETURN_IF_ERROR(Expect(hs.output(), sum, what + " sum"));
        HORA_RETURN_IF_ERROR(Expect(ha.output(), avg, what + " average"));
      }
    }
    return Status::Ok();
  }));
}

TEST_P(EngineShapes, AlltoallWithUnevenSplits) {
  const int n = GetParam();
  ThreadRanks ranks(n, TestSettings());
  // Rank p sends Split(p, q, s) rows to rank q at step s.
  auto split = [](int p, int q, int s) -> int64_t { return (p + 2 * q + s) % 3; };
  ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
    for (int step = 0; step < 4; ++step) {
      const int phase = step % 2;
      std::vector<int64_t> splits;
      for (int q = 0; q < n; ++q) splits.push_back(split(rank, q, phase));
      const int64_t dim0 = std::accumulate(splits.begin(), splits.end(), int64_t{0});
      auto mine = Rows<int64_t>(rank, dim0, step);
      Handle h =
          s.AlltoallAsync("a2a", TensorView(mine.data(), DataType::kInt64, {dim0, kCols}), splits);
      HORA_RETURN_IF_ERROR(h.Wait(kWait));
      std::vector<int64_t> want, want_splits;
      for (int p = 0; p < n; ++p) {
        int64_t offset = 0;
        for (int q = 0; q < rank; ++q) offset += split(p, q, phase);
        const int64_t count = split(p, rank, phase);
        auto rows = Rows<int64_t>(p, offset + count, step);
        want.insert(want.end(), rows.begin() + offset * kCols, rows.end());
        want_splits.push_back(count);
      }
      HORA_RETURN_IF_ERROR(Expect(h.output(), want, "step " + std::to_string(step)));
      if (h.received_splits() == nullptr || *h.received_splits() != want_splits)
        return InternalError("received splits");
    }
    return Status::Ok();
  }));
}

INSTANTIATE_TEST_SUITE_P(Worlds, EngineShapes, ::testing::Values(1, 2, 3, 4, 5));

TEST(EngineShapesErrors, AllgatherTrailingDimensionMismatchNamesEveryRank) {
  ThreadRanks ranks(3, TestSettings());
  ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
    std::vector<float> x(12, 1.0f);
    const int64_t cols = rank == 2 ? 4 : 3;
    Handle h = s.AllgatherAsync("bad", TensorView(x.data(), DataType::kFloat32, {2, cols}));
    Status st = h.Wait(kWait);
    if (st.code() != StatusCode::kMismatch) return InternalError(st.ToString());
    for (const char* part : {"'bad'", "rank 0 float32[2, 3]", "rank 2 float32[2, 4]"}) {
      if (st.message().find(part) == std::string::npos)
        return InternalError("message lacks '" + std::string(part) + "': " + st.message());
    }
    // The engine goes on.
    Handle ok = s.AllgatherAsync("good", TensorView(x.data(), DataType::kFloat32, {1, 3}));
    HORA_RETURN_IF_ERROR(ok.Wait(kWait));
    return ok.output()->shape() == std::vector<int64_t>{3, 3} ? Status::Ok()
                                                              : InternalError("good shape");
  }));
}

// Bad splits on rank 0 only: rank 0's call fails with its error, rank 1's
// (fine) with it too, naming rank 0 (EngineCall::Submit's refusal).
TEST(EngineShapesErrors, BadSplitsFailOnEveryRank) {
  ThreadRanks ranks(2, TestSettings());
  ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
    std::vector<int32_t> x(6);
    TensorView v(x.data(), DataType::kInt32, {6});
    const int64_t three[] = {1, 2, 3}, short_sum[] = {1, 2}, good[] = {3, 3};
    const std::span<const int64_t> bad[] = {three, short_sum};
    const char* said[] = {"3 splits given for 2 ranks", "splits add up to 3 rows"};
    for (int i = 0; i < 2; ++i) {
      Status e = s.AlltoallAsync("s" + std::to_string(i), v,
                                 rank == 0 ? bad[i] : std::span<const int64_t>(good))
                     .Wait(kWait);
      EXPECT_EQ(e.code(), rank == 0 ? StatusCode::kInvalidArgument : StatusCode::kMismatch)
          << e.ToString();
      EXPECT_NE(e.message().find(said[i]), std::string::npos) << e.ToString();
      if (rank == 1) {
        EXPECT_NE(e.message().find("rank 0"), std::string::npos) << e.ToString();
      }
    }
    return Status::Ok();
  }));
}

TEST(EngineShapesGroups, GroupedAllgatherAndReducescatter) {
  ThreadRanks ranks(3, TestSettings());
  ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
    for (int step = 0; step < 3; ++step) {
      auto a = Rows<float>(rank, rank + 1, step);
      auto b = Rows<float>(rank, 2, step);
      std::vector<TensorView> views = {TensorView(a.data(), DataType::kFloat32, {rank + 1, kCols}),
                                       TensorView(b.data(), DataType::kFloat32, {2, kCols})};
      std::vector<Handle> g = s.GroupedAllgatherAsync("gag", views);
      std::vector<Handle> r = s.GroupedReducescatterAsync("grs", views);
      for (auto& h : g) HORA_RETURN_IF_ERROR(h.Wait(kWait));
      std::vector<float> want;
      for (int p = 0; p < 3; ++p) {
        auto rows = Rows<float>(p, p + 1, step);
        want.insert(want.end(), rows.begin(), rows.end());
      }
      HORA_RETURN_IF_ERROR(Expect(g[0].output(), want, "group member 0"));
      Status mismatch = r[0].Wait(kWait);  // member 0's shape differs by rank
      if (mismatch.code() != StatusCode::kMismatch) return InternalError(mismatch.ToString());
      HORA_RETURN_IF_ERROR(r[1].Wait(kWait));
      if (r[1].output() == nullptr || r[1].output()->shape()[0] != (rank < 2 ? 1 : 0))
        return InternalError("grouped reducescatter rows");
    }
    return Status::Ok();
  }));
}

}  // namespace
}  // namespace hora
