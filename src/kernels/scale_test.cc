// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Tests of Scale, Finalize and NeedsFinalize (reduce.h) against the scalar
// references of kernel_test_util.h, for every instruction-set variant the
// machine supports.
//
// Tolerance: none. Each element is one multiply, rounded once (to the float
// type, or to an integer half away from zero with saturation), so results
// must match bit for bit; any NaN matches any NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "kernels/reduce.h"
#include "support/kernel_test_util.h"

namespace hora::kernels {
namespace {

using internal::Isa;
using test::Buffer;
using test::Fill;
using test::RefScale;
using test::SameElements;
using test::SizeOf;
using test::SupportedIsas;
using test::TypeName;

constexpr double kInf = std::numeric_limits<double>::infinity();

class ScaleTypedTest : public ::testing::TestWithParam<DataType> {};

TEST_P(ScaleTypedTest, MatchesReference) {
  const DataType t = GetParam();
  const size_t es = SizeOf(t);
  std::mt19937_64 rng(3000 + static_cast<int>(t));
  std::vector<double> factors = {1.0, 0.5,    -0.5, 2.0,   -1.0, 0.1,  1.5,   2.5,
                                 0.0, 1e-300, 1e10, -1e10, 3e38, kInf, -kInf, std::nan("")};
  if (t == DataType::kBool) factors = {1.0};  // bool accepts no other factor
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}, (size_t{1} << 20) + 3}) {
    Buffer src(t, n);
    Fill(t, src.data(), n, rng);
    for (double factor : factors) {
      if (n > 100000 && factor != 0.5 && factor != 1e10) continue;  // keep the test quick
      Buffer want(t, n);
      for (size_t i = 0; i < n; ++i) RefScale(t, factor, src.at(i), want.at(i));
      for (Isa isa : SupportedIsas()) {
        SCOPED_TRACE(std::string(internal::IsaName(isa)) + " " + TypeName(t) +
                     " count=" + std::to_string(n) + " factor=" + std::to_string(factor));
        Buffer d(t, n);
        internal::ScaleWith(isa, t, factor, d.data(), src.data(), n);
        EXPECT_TRUE(SameElements(t, d.data(), want.data(), n)) << "out of place";
        EXPECT_TRUE(d.GuardIntact());
        Buffer in_place = src.Copy();
        internal::ScaleWith(isa, t, factor, in_place.data(), in_place.data(), n);
        EXPECT_TRUE(SameElements(t, in_place.data(), want.data(), n)) << "in place";
        // Offset by one element, and (multi-byte types) by one byte.
        for (size_t offset : {es, size_t{1}}) {
          if (offset == 1 && es == 1) continue;
          Buffer us = src.CopyAt(offset), ud(t, n, offset);
          internal::ScaleWith(isa, t, factor, ud.data(), us.data(), n);
          EXPECT_TRUE(SameElements(t, ud.data(), want.data(), n)) << "offset " << offset;
          EXPECT_TRUE(ud.GuardIntact());
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ScaleTypedTest, ::testing::ValuesIn(kAllDataTypes),
                         [](const ::testing::TestParamInfo<DataType>& info) {
                           return std::string(TypeName(info.param));
                         });

// Scale in place on a few values with one variant; T is dtype's element type.
template <class T>
std::vector<T> Scaled(Isa isa, DataType dtype, double factor, std::vector<T> values) {
  internal::ScaleWith(isa, dtype, factor, values.data(), values.data(), values.size());
  return values;
}

// Integers round toward zero, as Horovod's kernels do (issue 25: an int32
// 7 with prescale 0.5 is 3 in Horovod, and was 4 here), and saturate.
TEST(ScaleKernelTest, IntegersRoundTowardZeroAndSaturate) {
  constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  for (Isa isa : SupportedIsas()) {
    SCOPED_TRACE(internal::IsaName(isa));
    using I8 = std::vector<int8_t>;
    EXPECT_EQ(Scaled<int8_t>(isa, DataType::kInt8, 2.0, {100, -100, 63, -64}),
              (I8{127, -128, 126, -128}));
    EXPECT_EQ(Scaled<int8_t>(isa, DataType::kInt8, 0.5, {-3, 3, 5, -5, 1, -1, 0}),
              (I8{-1, 1, 2, -2, 0, 0, 0}));
    EXPECT_EQ(Scaled<uint8_t>(isa, DataType::kUInt8, -1.0, {10, 0, 255}),
              (std::vector<uint8_t>{0, 0, 0}));
    EXPECT_EQ(Scaled<uint8_t>(isa, DataType::kUInt8, 1.5, {100, 171, 170, 1}),
              (std::vector<uint8_t>{150, 255, 255, 1}));
    EXPECT_EQ(Scaled<int16_t>(isa, DataType::kInt16, 0.25, {2, -2, 7, -7, 1, -1}),
              (std::vector<int16_t>{0, 0, 1, -1, 0, 0}));
    EXPECT_EQ(Scaled<int32_t>(isa, DataType::kInt32, 0.5, {7, -7, 5, 3}),
              (std::vector<int32_t>{3, -3, 2, 1}));
    EXPECT_EQ(Scaled<int32_t>(isa, DataType::kInt32, 3.0, {1 << 30, -(1 << 30), 7}),
              (std::vector<int32_t>{INT32_MAX, INT32_MIN, 21}));
    EXPECT_EQ(Scaled<int64_t>(isa, DataType::kInt64, 1.0, {kMax64, kMin64, -7}),
              (std::vector<int64_t>{kMax64, kMin64, -7}));
    // 2^53 + 1 becomes 2^53 in double before the multiply (types.h: computed in float64).
    EXPECT_EQ(Scaled<int64_t>(isa, DataType::kInt64, -0.5, {kMin64, 3, (int64_t{1} << 53) + 1}),
              (std::vector<int64_t>{int64_t{1} << 62, -1, -(int64_t{1} << 52)}));
    EXPECT_EQ(Scaled<int16_t>(isa, DataType::kInt16, kInf, {5, -5, 0}),
              (std::vector<int16_t>{INT16_MAX, INT16_MIN, 0}));
    EXPECT_EQ(Scaled<int16_t>(isa, DataType::kInt16, std::nan(""), {5, -5, 0}),
              (std::vector<int16_t>{0, 0, 0}));
  }
}

TEST(ScaleKernelTest, BoolIsNormalizedToZeroOrOne) {
  for (Isa isa : SupportedIsas()) {
    EXPECT_EQ(Scaled<uint8_t>(isa, DataType::kBool, 1.0, {0, 1, 2, 255}),
              (std::vector<uint8_t>{0, 1, 1, 1}));
  }
}

TEST(FinalizeKernelTest, NeedsFinalize) {
  EXPECT_FALSE(NeedsFinalize(DataType::kFloat32, ReduceOp::kSum, 4, 1.0));
  EXPECT_FALSE(NeedsFinalize(DataType::kFloat32, ReduceOp::kAverage, 1, 1.0));
  EXPECT_FALSE(NeedsFinalize(DataType::kInt32, ReduceOp::kAverage, 1, 1.0));
  EXPECT_FALSE(NeedsFinalize(DataType::kBool, ReduceOp::kMax, 8, 1.0));
  EXPECT_TRUE(NeedsFinalize(DataType::kFloat32, ReduceOp::kAverage, 2, 1.0));
  EXPECT_TRUE(NeedsFinalize(DataType::kInt8, ReduceOp::kAverage, 3, 1.0));
  EXPECT_TRUE(NeedsFinalize(DataType::kInt32, ReduceOp::kMin, 4, 2.0));
  EXPECT_TRUE(NeedsFinalize(DataType::kFloat16, ReduceOp::kAverage, 1, 0.5));
}

template <class T>
std::vector<T> Finalized(Isa isa, DataType dtype, ReduceOp op, int world_size, double postscale,
                         std::vector<T> values) {
  internal::FinalizeWith(isa, dtype, op, world_size, postscale, values.data(), values.size());
  return values;
}

TEST(FinalizeKernelTest, IntegerAverageRoundsTowardZeroThenPostscales) {
  const ReduceOp avg = ReduceOp::kAverage;
  for (Isa isa : SupportedIsas()) {
    SCOPED_TRACE(internal::IsaName(isa));
    EXPECT_EQ(Finalized<int32_t>(isa, DataType::kInt32, avg, 2, 1.0, {7, -7, -1, 1, 5, -5, 3}),
              (std::vector<int32_t>{3, -3, 0, 0, 2, -2, 1}));
    EXPECT_EQ(Finalized<int8_t>(isa, DataType::kInt8, avg, 3, 1.0, {-128, 127, -2}),
              (std::vector<int8_t>{-42, 42, 0}));
    EXPECT_EQ(Finalized<int8_t>(isa, DataType::kInt8, avg, 200, 1.0, {-128, 127}),
              (std::vector<int8_t>{0, 0}));
    EXPECT_EQ(Finalized<uint8_t>(isa, DataType::kUInt8, avg, 3, 1.0, {250, 255, 2}),
              (std::vector<uint8_t>{83, 85, 0}));
    EXPECT_EQ(Finalized<int64_t>(isa, DataType::kInt64, avg, 2, 1.0, {INT64_MIN, -3}),
              (std::vector<int64_t>{INT64_MIN / 2, -1}));
    // 10 / 4 = 2 -> 3, -10 / 4 = -2 -> -3, 7 / 4 = 1 -> 1.5 -> 1 (toward zero).
    EXPECT_EQ(Finalized<int32_t>(isa, DataType::kInt32, avg, 4, 1.5, {10, -10, 7}),
              (std::vector<int32_t>{3, -3, 1}));
    // Not an average: only the postscale, with saturation.
    EXPECT_EQ(Finalized<int16_t>(isa, DataType::kInt16, ReduceOp::kSum, 4, 2.0, {20000, -3}),
              (std::vector<int16_t>{INT16_MAX, -6}));
  }
}

// Floating average multiplies once by postscale / world_size, rounded to the
// compute type; the reference is RefScale with that factor.
TEST(FinalizeKernelTest, FloatAverageMultipliesByPostscaleOverWorldSize) {
  std::mt19937_64 rng(4000);
  for (DataType t :
       {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64}) {
    const size_t n = 1001;
    Buffer src(t, n);
    Fill(t, src.data(), n, rng);
    for (auto [world_size, postscale] : {std::pair{3, 1.0}, std::pair{7, 2.5}, std::pair{1, 0.5}}) {
      Buffer want(t, n);
      for (size_t i = 0; i < n; ++i) RefScale(t, postscale / world_size, src.at(i), want.at(i));
      for (Isa isa : SupportedIsas()) {
        SCOPED_TRACE(std::string(internal::IsaName(isa)) + " " + TypeName(t) +
                     " world_size=" + std::to_string(world_size));
        Buffer d = src.Copy();
        internal::FinalizeWith(isa, t, ReduceOp::kAverage, world_size, postscale, d.data(), n);
        EXPECT_TRUE(SameElements(t, d.data(), want.data(), n));
      }
    }
  }
}

TEST(FinalizeKernelTest, NoOpLeavesDataUntouched) {
  // A signaling NaN would be quieted by a multiply by 1.
  std::vector<uint32_t> bits = {0x7f800001u, 0x3f800000u};
  Finalize(DataType::kFloat32, ReduceOp::kAverage, 1, 1.0, bits.data(), bits.size());
  Finalize(DataType::kFloat32, ReduceOp::kSum, 8, 1.0, bits.data(), bits.size());
  EXPECT_EQ(bits, (std::vector<uint32_t>{0x7f800001u, 0x3f800000u}));
}

}  // namespace
}  // namespace hora::kernels
