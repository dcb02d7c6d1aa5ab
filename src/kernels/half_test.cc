// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Tests of the scalar float16 / bfloat16 conversions (half.h): every float16
// pattern round-trips through float, and float -> float16 / bfloat16 agree
// with references on random floats and on the hard cases (halfway points,
// subnormals, overflow, NaN). Float16 is compared with the compiler's
// _Float16 conversions where the compiler has them (x86-64: GCC >= 12);
// bfloat16 with a reference that picks the nearer neighbour in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/half.h"

namespace hora::kernels {
namespace {

float FloatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint32_t BitsOf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

bool IsFloat16NaN(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool IsBFloat16NaN(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

// Floats that stress a conversion to a 16-bit format whose value of pattern
// h is `decode(h)`: for each finite non-negative pattern, the point halfway
// to the next pattern and its float neighbours (all exact in float), plus
// zeros, infinities, NaNs, float subnormals and random bit patterns.
template <class Decode>
std::vector<float> HardFloats(Decode decode, uint16_t first_inf) {
  std::vector<float> out = {0.0f,
                            -0.0f,
                            INFINITY,
                            -INFINITY,
                            NAN,
                            -NAN,
                            FloatFromBits(0x7f800001u),
                            FloatFromBits(0x00000001u),
                            FloatFromBits(0x807fffffu),
                            std::numeric_limits<float>::max()};
  for (uint32_t h = 0; h < first_inf; ++h) {
    double lo = decode(static_cast<uint16_t>(h));
    double hi = decode(static_cast<uint16_t>(h + 1));
    if (h + 1 == first_inf) hi = 2 * lo - decode(static_cast<uint16_t>(h - 1));  // next step
    auto mid = static_cast<float>((lo + hi) / 2);
    for (float f :
         {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), static_cast<float>(lo)}) {
      out.push_back(f);
      out.push_back(-f);
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 1'000'000; ++i) out.push_back(FloatFromBits(static_cast<uint32_t>(rng())));
  return out;
}

TEST(HalfTest, EveryFloat16RoundTripsThroughFloat) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    float f = Float16ToFloat(static_cast<uint16_t>(h));
    uint16_t back = FloatToFloat16(f);
    if (IsFloat16NaN(static_cast<uint16_t>(h))) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      ASSERT_EQ(back, h | 0x200u) << std::hex << h;  // payload kept, quieted
    } else {
      ASSERT_EQ(back, h) << std::hex << h << " -> " << f;
    }
  }
}

TEST(HalfTest, EveryBFloat16RoundTripsThroughFloat) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    float f = BFloat16ToFloat(static_cast<uint16_t>(h));
    ASSERT_EQ(BitsOf(f), h << 16);
    uint16_t back = FloatToBFloat16(f);
    ASSERT_EQ(back, IsBFloat16NaN(static_cast<uint16_t>(h)) ? (h | 0x40u) : h) << std::hex << h;
  }
}

#if defined(__FLT16_MANT_DIG__)
uint16_t CompilerFloat16(float f) {
  auto h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}

TEST(HalfTest, Float16ToFloatMatchesCompiler) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    if (IsFloat16NaN(static_cast<uint16_t>(h))) continue;
    _Float16 x;
    auto bits = static_cast<uint16_t>(h);
    std::memcpy(&x, &bits, sizeof x);
    ASSERT_EQ(BitsOf(Float16ToFloat(bits)), BitsOf(static_cast<float>(x))) << std::hex << h;
  }
}

TEST(HalfTest, FloatToFloat16MatchesCompiler) {
  size_t checked = 0;
  for (float f : HardFloats(Float16ToFloat, 0x7c00)) {
    uint16_t got = FloatToFloat16(f);
    uint16_t want = CompilerFloat16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(IsFloat16NaN(got)) << std::hex << BitsOf(f);
    } else {
      ASSERT_EQ(got, want) << std::hex << "float 0x" << BitsOf(f) << " (" << f << ")";
    }
    ++checked;
  }
  EXPECT_GT(checked, 1'000'000u);
}
#else
TEST(HalfTest, FloatToFloat16MatchesCompiler) { GTEST_SKIP() << "no _Float16 in this compiler"; }
#endif

// Round to nearest, ties to even, by comparing the two neighbouring bfloat16
// values in double; beyond the largest finite value the next step is 2^128.
uint16_t ReferenceBFloat16(float f) {
  if (std::isnan(f)) return 0x7fc0;
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  auto lo = static_cast<uint16_t>((BitsOf(f) & 0x7fffffffu) >> 16);  // truncated magnitude
  if (lo == 0x7f80) return sign | lo;                                // infinity
  auto hi = static_cast<uint16_t>(lo + 1);
  double x = std::fabs(static_cast<double>(f));
  double below = BFloat16ToFloat(lo);
  double above = hi == 0x7f80 ? std::ldexp(1.0, 128) : BFloat16ToFloat(hi);
  bool up = x - below > above - x || (x - below == above - x && (lo & 1u));
  return sign | (up ? hi : lo);
}

TEST(HalfTest, FloatToBFloat16MatchesReference) {
  for (float f : HardFloats(BFloat16ToFloat, 0x7f80)) {
    uint16_t got = FloatToBFloat16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(IsBFloat16NaN(got)) << std::hex << BitsOf(f);
    } else {
      ASSERT_EQ(got, ReferenceBFloat16(f))
          << std::hex << "float 0x" << BitsOf(f) << " (" << f << ")";
    }
  }
}

TEST(HalfTest, KnownValues) {
  EXPECT_EQ(FloatToFloat16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToFloat16(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToFloat16(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToFloat16(65520.0f), 0x7c00);               // halfway to 2^16 rounds to inf
  EXPECT_EQ(FloatToFloat16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToFloat16(std::ldexp(1.0f, -25)), 0x0000);  // halfway, ties to even (0)
  EXPECT_EQ(FloatToFloat16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(FloatToFloat16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp, ties to even (2)
  EXPECT_EQ(FloatToFloat16(-2.0f), 0xc000);
  EXPECT_EQ(Float16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(Float16ToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(FloatFromBits(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(FloatToBFloat16(FloatFromBits(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);
}

}  // namespace
}  // namespace hora::kernels
