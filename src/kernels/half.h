// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Scalar conversions between float32 and the 16-bit float formats, bit-exact
// with IEEE 754 binary16 and with bfloat16 (round to nearest even, NaN kept
// NaN). Used by the kernels' baseline paths and by tests' references.
// Checked against all 2^32 floats: float16 against the F16C instructions,
// bfloat16 against a nearest-neighbour reference (half_test.cc samples both).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define HORA_HALF_HD __host__ __device__  // the GPU's kernels convert with these too
#else
#define HORA_HALF_HD
#endif

namespace hora::kernels {

HORA_HALF_HD inline float BFloat16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

HORA_HALF_HD inline uint16_t FloatToBFloat16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep the payload's top bits, set quiet
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  }
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

HORA_HALF_HD inline float Float16ToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);  // normal
  } else if (mant == 0) {
    bits = sign;  // zero
  } else {        // subnormal: normalize
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    bits = sign | ((112u - static_cast<uint32_t>(e)) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

HORA_HALF_HD inline uint16_t FloatToFloat16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {
    // The result is subnormal or zero.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
    uint32_t e = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;  // value = mant * 2^(e - 150); in units of 2^-24: mant >> shift
    uint32_t half_bits = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (half_bits & 1u))) ++half_bits;
    return static_cast<uint16_t>(sign | half_bits);
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);  // round to nearest even at bit 13
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

}  // namespace hora::kernels
