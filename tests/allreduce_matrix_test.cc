// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Allreduce, the full matrix: world sizes 1..16 x every algorithm x every
// dtype x every op (plain and with pre/post scale factors) x element counts
// 0, 1, 7 and 1031, in place and out of place, each rank's result compared
// with the independent reference of support/reference.h (exact for integers
// and bool; floating tolerance stated there).
//
// The 4 MiB count (the one that spans many segments of every algorithm, and
// was 92% of this suite's time when it ran in every combination) runs once per
// algorithm per world and dtype: the reduction and the placement rotate with
// the world, dtype and algorithm, so across the matrix each algorithm still
// meets every reduction, both placements and every element size at 4 MiB.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "collectives/selector.h"
#include "support/reference.h"
#include "support/thread_ranks.h"

namespace hora::testing {
namespace {

struct MatrixParam {
  int world;
  DataType dtype;
};

std::string ParamName(const ::testing::TestParamInfo<MatrixParam>& info) {
  return "world" + std::to_string(info.param.world) + "_" + DataTypeName(info.param.dtype);
}

class AllreduceMatrix : public ::testing::TestWithParam<MatrixParam> {};

// The largest message: 4 MiB. The sanitizer pass of `make test` sets
// HORATEST_LARGE_BYTES=1M to keep its run time in bounds (the 4 MiB run is
// the unsanitized pass); a 1 MiB message still spans several ring segments.
size_t LargeBytes() {
  const char* v = std::getenv("HORATEST_LARGE_BYTES");
  if (v == nullptr) return size_t{4} << 20;
  return static_cast<size_t>(std::strtoull(v, nullptr, 10))
         << (std::string(v).back() == 'M' ? 20 : 0);
}

std::vector<Reduction> ReductionsFor(DataType dtype) {
  std::vector<Reduction> out;
  for (ReduceOp op : kAllReduceOps) out.push_back({op, 1.0, 1.0});
  if (dtype != DataType::kBool) {
    out.push_back({ReduceOp::kSum, 0.5, 3.0});
    out.push_back({ReduceOp::kAverage, 0.5, 3.0});
    out.push_back({ReduceOp::kMax, 0.5, 3.0});
  }
  return out;
}

TEST_P(AllreduceMatrix, MatchesReference) {
  const auto [n, dtype] = GetParam();
  const size_t esize = DataTypeSize(dtype);
  const std::vector<size_t> counts = {0, 1, 7, 1031, LargeBytes() / esize};

  // One job per algorithm, each forced through HORA_ALLREDUCE_ALGO.
  std::vector<std::unique_ptr<ThreadRanks>> jobs;
  for (const AllreduceAlgorithm& a : kAllAllreduceAlgorithms) {
    jobs.push_back(
        std::make_unique<ThreadRanks>(n, TestSettings({{"HORA_ALLREDUCE_ALGO", a.name}})));
    ASSERT_EQ(jobs.back()->size(), n);
  }

  const std::vector<Reduction> reductions = ReductionsFor(dtype);
  const size_t rotation = static_cast<size_t>(n) + static_cast<size_t>(dtype);
  uint64_t seed = 1;
  for (size_t ri = 0; ri < reductions.size(); ++ri) {
    const Reduction& red = reductions[ri];
    for (size_t count : counts) {
      const bool large = count == counts.back();
      ++seed;
      // The large count runs here only for the algorithms whose turn it is.
      auto runs_large = [&](size_t a) { return (rotation + a) % reductions.size() == ri; };
      bool any = !large;
      for (size_t a = 0; a < jobs.size(); ++a) any = any || runs_large(a);
      if (!any) continue;
      std::vector<std::vector<uint8_t>> inputs(static_cast<size_t>(n),
                                               std::vector<uint8_t>(count * esize));
      std::vector<const void*> ptrs;
      for (int r = 0; r < n; ++r) {
        FillInput(dtype, red.op, inputs[static_cast<size_t>(r)].data(), count, seed, r);
        ptrs.push_back(inputs[static_cast<size_t>(r)].data());
      }
      const bool defined = !(dtype == DataType::kBool && red.op == ReduceOp::kAverage);
      const Expected expected = defined ? ReferenceAllreduce(dtype, red, ptrs, count) : Expected{};

      for (size_t a = 0; a < jobs.size(); ++a) {
        // The large count: this algorithm's one reduction and placement.
        if (large && !runs_large(a)) continue;
        for (bool in_place : {false, true}) {
          if (large && in_place != (((rotation + a) / reductions.size() + a) % 2 == 1)) continue;
          std::vector<std::vector<uint8_t>> outputs(static_cast<size_t>(n));
          auto results = jobs[a]->Run([&](int r, Session& s) {
            auto& out = outputs[static_cast<size_t>(r)];
            out.assign(count * esize + 1, 0xAB);  // one guard byte past the end
            const void* in = inputs[static_cast<size_t>(r)].data();
            if (in_place && count > 0) std::memcpy(out.data(), in, count * esize);
            TensorView iv =
                TensorView::Flat(in_place ? out.data() : const_cast<void*>(in), dtype, count);
            TensorView ov = TensorView::Flat(out.data(), dtype, count);
            return s.Allreduce(iv, ov, red);
          });
          const std::string what =
              std::string(kAllAllreduceAlgorithms[a].name) + " " + ReduceOpName(red.op) +
              " pre=" + std::to_string(red.prescale_factor) +
              " post=" + std::to_string(red.postscale_factor) + " count=" + std::to_string(count) +
              (in_place ? " in-place" : " out-of-place");
          for (int r = 0; r < n; ++r) {
            const Status& st = results[static_cast<size_t>(r)];
            if (!defined) {
              EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << what << " rank " << r;
              EXPECT_NE(st.message().find("average is not defined for bool"), std::string::npos)
                  << st.message();
              continue;
            }
            ASSERT_TRUE(st.ok()) << what << " rank " << r << ": " << st.ToString();
            const auto& out = outputs[static_cast<size_t>(r)];
            EXPECT_EQ(out[count * esize], 0xAB) << what << " rank " << r << ": wrote past the end";
            // Rank 0 is checked against the reference; every other rank
            // must hold bitwise the same result as rank 0.
            if (r == 0) {
              const std::string diff = Compare(expected, out.data(), 0, count);
              ASSERT_TRUE(diff.empty()) << what << " rank 0: " << diff;
            } else if (count > 0 &&
                       std::memcmp(out.data(), outputs[0].data(), count * esize) != 0) {
              ADD_FAILURE() << what << ": rank " << r
                            << " differs from rank 0: " << Compare(expected, out.data(), 0, count);
            }
          }
        }
      }
    }
  }
}

std::vector<MatrixParam> AllParams() {
  std::vector<MatrixParam> v;
  for (int n : {1, 2, 3, 4, 5, 7, 8, 16}) {
    for (DataType t : kAllDataTypes) v.push_back({n, t});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, AllreduceMatrix, ::testing::ValuesIn(AllParams()), ParamName);

}  // namespace
}  // namespace hora::testing
