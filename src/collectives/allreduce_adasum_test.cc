// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Adasum against a reference written here from the definition (the binary
// tree of pairwise combinations over ranks 0..n-1, in double), at 1, 2, 4
// and 8 ranks as threads, for every floating dtype and sizes 0, 1, odd and
// large, direct and through the engine (two tensors fused in one cycle);
// every rank's result bitwise identical; the definition's fixed points
// (Adasum(a, a) = a, orthogonal vectors add); and the refusals: a world that
// is not a power of two, an integer dtype, a reducescatter.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/half.h"
#include "support/reference.h"
#include "support/thread_ranks.h"

namespace hora::testing {
namespace {

constexpr auto kWait = std::chrono::seconds(60);

// Rank r's input: a smooth pattern plus a rank-dependent part, so that
// vectors are neither equal nor orthogonal.
double InputValue(int rank, size_t i, int seed) {
  return std::sin(0.37 * static_cast<double>(i) + seed) +
         0.25 * (rank + 1) * std::cos(1.3 * i + rank);
}

// Storage of one element of `dtype` (floating only) and back.
void Put(DataType dtype, void* base, size_t i, double v) {
  switch (dtype) {
    case DataType::kFloat32:
      static_cast<float*>(base)[i] = static_cast<float>(v);
      return;
    case DataType::kFloat64:
      static_cast<double*>(base)[i] = v;
      return;
    case DataType::kFloat16:
      static_cast<uint16_t*>(base)[i] = kernels::FloatToFloat16(static_cast<float>(v));
      return;
    default:
      static_cast<uint16_t*>(base)[i] = kernels::FloatToBFloat16(static_cast<float>(v));
  }
}
double Get(DataType dtype, const void* base, size_t i) {
  switch (dtype) {
    case DataType::kFloat32:
      return static_cast<const float*>(base)[i];
    case DataType::kFloat64:
      return static_cast<const double*>(base)[i];
    case DataType::kFloat16:
      return kernels::Float16ToFloat(static_cast<const uint16_t*>(base)[i]);
    default:
      return kernels::BFloat16ToFloat(static_cast<const uint16_t*>(base)[i]);
  }
}

// The definition: combine(a, b) = (1 - a.b/2|a|^2) a + (1 - a.b/2|b|^2) b.
std::vector<double> Combine(const std::vector<double>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const double ca = aa > 0 ? 1 - ab / (2 * aa) : 1;
  const double cb = bb > 0 ? 1 - ab / (2 * bb) : 1;
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = ca * a[i] + cb * b[i];
  return out;
}

// The tree over ranks 0..n-1: pairs (0,1), (2,3), ... then pairs of pairs.
std::vector<double> Tree(std::vector<std::vector<double>> v) {
  for (size_t width = 1; width < v.size(); width *= 2) {
    for (size_t r = 0; r < v.size(); r += 2 * width) v[r] = Combine(v[r], v[r + width]);
  }
  return v[0];
}

class Adasum : public ::testing::TestWithParam<int> {};

TEST_P(Adasum, MatchesTheDefinitionBitwiseIdenticalOnEveryRank) {
  const int n = GetParam();
  ThreadRanks job(n, TestSettings());
  for (DataType dtype :
       {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64}) {
    const size_t esize = DataTypeSize(dtype);
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1031}, size_t{100000}}) {
      for (bool engine : {false, true}) {
        SCOPED_TRACE(std::string(DataTypeName(dtype)) + " count " + std::to_string(count) +
                     (engine ? " engine" : " direct"));
        // Inputs as stored (rounded to dtype), and the reference from them.
        std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(count * esize));
        std::vector<std::vector<uint8_t>> out(n, std::vector<uint8_t>(count * esize));
        std::vector<std::vector<uint8_t>> in2(n, std::vector<uint8_t>(3 * esize));
        std::vector<std::vector<double>> stored(n, std::vector<double>(count));
        std::vector<std::vector<double>> stored2(n, std::vector<double>(3));
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) {
            Put(dtype, in[r].data(), i, InputValue(r, i, 1));
            stored[r][i] = Get(dtype, in[r].data(), i);
          }
          for (size_t i = 0; i < 3; ++i) {
            Put(dtype, in2[r].data(), i, InputValue(r, i, 7));
            stored2[r][i] = Get(dtype, in2[r].data(), i);
          }
        }
        // Scale factors: Adasum is scale-invariant, so pre 0.5 and post 3
        // give 1.5 times the unscaled combination.
        const Reduction red{ReduceOp::kAdasum, 0.5, 3.0};
        ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
          auto view = [&](std::vector<uint8_t>& b, size_t c) {
            return TensorView::Flat(b.data(), dtype, c);
          };
          if (!engine) return s.Allreduce(view(in[r], count), view(out[r], count), red);
          // Two tensors submitted together: fused in one cycle, reduced apart.
          Handle h1 = s.AllreduceAsync("ada.big", view(in[r], count), view(out[r], count), red);
          Handle h2 = s.AllreduceAsync("ada.small", view(in2[r], 3), view(in2[r], 3), red);
          HORA_RETURN_IF_ERROR(h1.Wait(kWait));
          return h2.Wait(kWait);
        }));
        const std::vector<double> want = Tree(stored);
        // Each level rounds to the storage type: allow (levels + 2) roundings
        // of the result's magnitude per element, relative to the vector's norm.
        double norm = 0;
        for (double w : want) norm = std::max(norm, std::fabs(w));
        const double tol = 1.5 * (std::log2(n) + 3) * UnitRoundoff(dtype) * 4 * (norm + 1);
        for (size_t i = 0; i < count; ++i) {
          const double got = Get(dtype, out[0].data(), i);
          ASSERT_NEAR(got, 1.5 * want[i], tol) << "element " << i;
        }
        for (int r = 1; r < n; ++r) {
          ASSERT_EQ(out[r], out[0]) << "rank " << r << " differs from rank 0";
        }
        if (engine) {
          const std::vector<double> want2 = Tree(stored2);
          for (size_t i = 0; i < 3; ++i) {
            ASSERT_NEAR(Get(dtype, in2[0].data(), i), 1.5 * want2[i],
                        1.5 * (std::log2(n) + 3) * UnitRoundoff(dtype) * 8)
                << "fused tensor element " << i;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, Adasum, ::testing::Values(1, 2, 4, 8));

TEST(AdasumDefinition, EqualVectorsStayOrthogonalOnesAdd) {
  ThreadRanks job(2, TestSettings());
  std::vector<std::vector<double>> same(2, {1.0, -2.0, 3.0});
  std::vector<std::vector<double>> orth = {{1.0, 0.0, 2.0}, {0.0, 5.0, 0.0}};
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    auto v = [&](std::vector<double>& x) {
      return TensorView::Flat(x.data(), DataType::kFloat64, 3);
    };
    HORA_RETURN_IF_ERROR(s.Allreduce(v(same[r]), v(same[r]), {ReduceOp::kAdasum}));
    return s.Allreduce(v(orth[r]), v(orth[r]), {ReduceOp::kAdasum});
  }));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(same[r], (std::vector<double>{1.0, -2.0, 3.0}));  // (1/2) a + (1/2) a
    EXPECT_EQ(orth[r], (std::vector<double>{1.0, 5.0, 2.0}));   // a.b = 0: a + b
  }
}

TEST(AdasumRefusals, NotAPowerOfTwoIntegersAndReducescatter) {
  ThreadRanks three(3, TestSettings());
  std::vector<std::vector<float>> x(3, std::vector<float>(4, 1.0f));
  const auto st = three.Run([&](int r, Session& s) -> Status {
    auto v = TensorView::Flat(x[r].data(), DataType::kFloat32, 4);
    return s.Allreduce(v, v, {ReduceOp::kAdasum});
  });
  for (const Status& s : st) {
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.ToString();
    EXPECT_NE(s.message().find("power-of-two"), std::string::npos) << s.ToString();
  }
  ThreadRanks two(2, TestSettings());
  std::vector<std::vector<int32_t>> ints(2, std::vector<int32_t>(4, 1));
  const auto ist = two.Run([&](int r, Session& s) -> Status {
    auto v = TensorView::Flat(ints[r].data(), DataType::kInt32, 4);
    Status direct = s.Allreduce(v, v, {ReduceOp::kAdasum});
    Status queued = s.AllreduceAsync("ints", v, v, {ReduceOp::kAdasum}).Wait(kWait);
    Status scatter =
        s.ReducescatterAsync("rs", TensorView::Flat(x[r].data(), DataType::kFloat32, 4),
                             {ReduceOp::kAdasum})
            .Wait(kWait);
    for (const Status* one : {&direct, &queued, &scatter}) {
      if (one->code() != StatusCode::kInvalidArgument ||
          one->message().find("Adasum") == std::string::npos) {
        return InternalError("expected an Adasum refusal, got " + one->ToString());
      }
    }
    return Status::Ok();
  });
  ExpectAllOk(ist);
}

}  // namespace
}  // namespace hora::testing
