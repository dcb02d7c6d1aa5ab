// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Tests of Reduce and Reduce3 (reduce.h) against the independent scalar
// references of kernel_test_util.h, for every DataType x op, element count,
// aliasing, alignment and instruction-set variant the machine supports.
// Scale and Finalize: scale_test.cc; half.h: half_test.cc.
//
// Tolerance: none. Each result element is one IEEE operation on two inputs;
// a float32 result computed in double and rounded once is exactly the
// float32 result (double carries more than 2 * 24 + 2 bits), and float16 /
// bfloat16 are specified as one float32 operation rounded with half.h. So
// every element must match bit for bit, except that any NaN matches any NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
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
using test::OpName;
using test::RefReduce;
using test::SameElements;
using test::SizeOf;
using test::SupportedIsas;
using test::TypeName;

constexpr ReduceOp kReduceOps[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax,
                                   ReduceOp::kProduct};
constexpr size_t kCounts[] = {0, 1, 7, 1001, (size_t{1} << 20) + 3};

std::string Trace(Isa isa, DataType t, const char* what, size_t n) {
  std::ostringstream s;
  s << internal::IsaName(isa) << " " << TypeName(t) << " " << what << " count=" << n;
  return s.str();
}

class ReduceTypedTest : public ::testing::TestWithParam<DataType> {};

std::string ParamName(const ::testing::TestParamInfo<DataType>& info) {
  return TypeName(info.param);
}

// Every op, count, variant and aliasing of Reduce/Reduce3 against RefReduce.
TEST_P(ReduceTypedTest, ReduceMatchesReference) {
  const DataType t = GetParam();
  const size_t es = SizeOf(t);
  std::mt19937_64 rng(1000 + static_cast<int>(t));
  for (size_t n : kCounts) {
    Buffer a(t, n), b(t, n);
    Fill(t, a.data(), n, rng);
    Fill(t, b.data(), n, rng);
    for (ReduceOp op : kReduceOps) {
      Buffer want(t, n);
      for (size_t i = 0; i < n; ++i) RefReduce(t, op, a.at(i), b.at(i), want.at(i));
      for (Isa isa : SupportedIsas()) {
        SCOPED_TRACE(Trace(isa, t, OpName(op), n));
        Buffer d(t, n);
        internal::Reduce3With(isa, t, op, d.data(), a.data(), b.data(), n);
        EXPECT_TRUE(SameElements(t, d.data(), want.data(), n)) << "Reduce3 distinct dst";
        EXPECT_TRUE(d.GuardIntact()) << "Reduce3 wrote past the end";

        Buffer in_place = a.Copy();
        internal::ReduceWith(isa, t, op, in_place.data(), b.data(), n);
        EXPECT_TRUE(SameElements(t, in_place.data(), want.data(), n)) << "Reduce in place";
        EXPECT_TRUE(in_place.GuardIntact());

        Buffer dst_a = a.Copy();
        internal::Reduce3With(isa, t, op, dst_a.data(), dst_a.data(), b.data(), n);
        EXPECT_TRUE(SameElements(t, dst_a.data(), want.data(), n)) << "Reduce3 dst == a";

        Buffer dst_b = b.Copy();
        internal::Reduce3With(isa, t, op, dst_b.data(), a.data(), dst_b.data(), n);
        EXPECT_TRUE(SameElements(t, dst_b.data(), want.data(), n)) << "Reduce3 dst == b";

        // Offset by one element, and (multi-byte types) by one byte.
        for (size_t offset : {es, size_t{1}}) {
          if (offset == 1 && es == 1) continue;
          Buffer ua = a.CopyAt(offset), ub = b.CopyAt(offset), ud(t, n, offset);
          internal::Reduce3With(isa, t, op, ud.data(), ua.data(), ub.data(), n);
          EXPECT_TRUE(SameElements(t, ud.data(), want.data(), n)) << "offset " << offset;
          EXPECT_TRUE(ud.GuardIntact());
          internal::ReduceWith(isa, t, op, ua.data(), ub.data(), n);
          EXPECT_TRUE(SameElements(t, ua.data(), want.data(), n)) << "in place, offset " << offset;
        }
      }
    }
  }
}

// dst == a == b, and a == b with a distinct dst.
TEST_P(ReduceTypedTest, ReduceOfABufferWithItself) {
  const DataType t = GetParam();
  std::mt19937_64 rng(2000 + static_cast<int>(t));
  const size_t n = 1001;
  Buffer a(t, n);
  Fill(t, a.data(), n, rng);
  for (ReduceOp op : kReduceOps) {
    Buffer want(t, n);
    for (size_t i = 0; i < n; ++i) RefReduce(t, op, a.at(i), a.at(i), want.at(i));
    for (Isa isa : SupportedIsas()) {
      SCOPED_TRACE(Trace(isa, t, OpName(op), n));
      Buffer d(t, n);
      internal::Reduce3With(isa, t, op, d.data(), a.data(), a.data(), n);
      EXPECT_TRUE(SameElements(t, d.data(), want.data(), n)) << "a == b";
      Buffer self = a.Copy();
      internal::Reduce3With(isa, t, op, self.data(), self.data(), self.data(), n);
      EXPECT_TRUE(SameElements(t, self.data(), want.data(), n)) << "dst == a == b";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ReduceTypedTest, ::testing::ValuesIn(kAllDataTypes), ParamName);

TEST(ReduceKernelTest, BoolTreatsNonzeroAsTrueAndStoresZeroOrOne) {
  const std::vector<uint8_t> a = {0, 2, 0, 255, 7};
  const std::vector<uint8_t> b = {0, 0, 3, 128, 1};
  struct Case {
    ReduceOp op;
    std::vector<uint8_t> want;
  };
  for (const Case& c :
       {Case{ReduceOp::kSum, {0, 1, 1, 1, 1}}, Case{ReduceOp::kMax, {0, 1, 1, 1, 1}},
        Case{ReduceOp::kMin, {0, 0, 0, 1, 1}}, Case{ReduceOp::kProduct, {0, 0, 0, 1, 1}}}) {
    for (Isa isa : SupportedIsas()) {
      std::vector<uint8_t> d(a.size());
      internal::Reduce3With(isa, DataType::kBool, c.op, d.data(), a.data(), b.data(), a.size());
      EXPECT_EQ(d, c.want) << OpName(c.op) << " " << internal::IsaName(isa);
    }
  }
}

TEST(ReduceKernelTest, FloatMinMaxAreIeeeMinimumMaximum) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a = {-0.0f, 0.0f, nan, 1.0f, -2.0f};
  const std::vector<float> b = {0.0f, -0.0f, 1.0f, nan, 3.0f};
  for (Isa isa : SupportedIsas()) {
    std::vector<float> mn(a.size()), mx(a.size());
    internal::Reduce3With(isa, DataType::kFloat32, ReduceOp::kMin, mn.data(), a.data(), b.data(),
                          a.size());
    internal::Reduce3With(isa, DataType::kFloat32, ReduceOp::kMax, mx.data(), a.data(), b.data(),
                          a.size());
    EXPECT_TRUE(std::signbit(mn[0]) && std::signbit(mn[1]) && mn[0] == 0.0f);
    EXPECT_TRUE(!std::signbit(mx[0]) && !std::signbit(mx[1]) && mx[0] == 0.0f);
    EXPECT_TRUE(std::isnan(mn[2]) && std::isnan(mn[3]) && std::isnan(mx[2]) && std::isnan(mx[3]));
    EXPECT_EQ(mn[4], -2.0f);
    EXPECT_EQ(mx[4], 3.0f);
  }
}

TEST(ReduceKernelTest, IntegersWrap) {
  std::vector<int8_t> a = {127, -128, 16}, b = {1, -1, 16};
  Reduce(DataType::kInt8, ReduceOp::kSum, a.data(), b.data(), a.size());
  EXPECT_EQ(a, (std::vector<int8_t>{-128, 127, 32}));
  Reduce(DataType::kInt8, ReduceOp::kProduct, a.data(), b.data(), a.size());
  EXPECT_EQ(a, (std::vector<int8_t>{-128, -127, 0}));  // 32 * 16 = 512 = 0 mod 256
  std::vector<uint16_t> x = {65535}, y = {65535};      // product must not overflow int
  Reduce(DataType::kInt16, ReduceOp::kProduct, x.data(), y.data(), 1);
  EXPECT_EQ(x[0], 1);
}

}  // namespace
}  // namespace hora::kernels
