// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Shared helpers of the kernel tests: buffers with guard bytes at chosen
// offsets, random inputs with the interesting values mixed in, and scalar
// references written independently of the kernels (integers in 64 bits with
// an explicit wrap to the type's width, floating types in double; float16 and
// bfloat16 as one float32 operation rounded with half.h, as documented in
// include/hora/types.h). Test-only.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <vector>

#include "hora/types.h"
#include "kernels/half.h"
#include "kernels/isa.h"

namespace hora::kernels::test {

// The instruction-set variants this machine can run.
inline std::vector<internal::Isa> SupportedIsas() {
  std::vector<internal::Isa> isas;
  for (internal::Isa isa : internal::kAllIsas) {
    if (internal::IsaSupported(isa)) isas.push_back(isa);
  }
  return isas;
}

inline const char* OpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAverage:
      return "average";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kProduct:
      return "product";
    case ReduceOp::kAdasum:
      return "adasum";
  }
  return "?";
}

inline size_t SizeOf(DataType t) {
  switch (t) {
    case DataType::kUInt8:
    case DataType::kInt8:
    case DataType::kBool:
      return 1;
    case DataType::kInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kFloat64:
      return 8;
  }
  return 0;
}

inline const char* TypeName(DataType t) {
  switch (t) {
    case DataType::kUInt8:
      return "uint8";
    case DataType::kInt8:
      return "int8";
    case DataType::kInt16:
      return "int16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kFloat16:
      return "float16";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat64:
      return "float64";
    case DataType::kBool:
      return "bool";
  }
  return "?";
}

inline bool IsFloat(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat32 ||
         t == DataType::kFloat64;
}

// Integer element, sign-extended (uint8 zero-extended).
inline int64_t LoadInt(DataType t, const unsigned char* p) {
  switch (t) {
    case DataType::kUInt8:
      return *p;
    case DataType::kInt8:
      return static_cast<int8_t>(*p);
    case DataType::kInt16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DataType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

// Stores the low SizeOf(t) bytes of v (little-endian): the wrap modulo 2^bits.
inline void StoreInt(DataType t, unsigned char* p, uint64_t v) {
  for (size_t i = 0; i < SizeOf(t); ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

inline double LoadFloat(DataType t, const unsigned char* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  switch (t) {
    case DataType::kFloat16:
      return Float16ToFloat(h);
    case DataType::kBFloat16:
      return BFloat16ToFloat(h);
    case DataType::kFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

// float16 / bfloat16 / float32 from a float32 value (rounded by half.h).
inline void StoreFloat32(DataType t, unsigned char* p, float v) {
  uint16_t h = t == DataType::kFloat16 ? FloatToFloat16(v) : FloatToBFloat16(v);
  if (t == DataType::kFloat32) {
    std::memcpy(p, &v, 4);
  } else {
    std::memcpy(p, &h, 2);
  }
}

// `count` elements at a 64-byte boundary plus `offset` bytes, followed by 64
// guard bytes (and preceded by `offset` guard bytes) that must stay intact.
class Buffer {
 public:
  static constexpr unsigned char kGuard = 0xA5;

  Buffer(DataType t, size_t count, size_t offset = 0)
      : type_(t),
        count_(count),
        offset_(offset),
        storage_(count * SizeOf(t) + offset + 192, kGuard) {
    auto addr = reinterpret_cast<uintptr_t>(storage_.data());
    data_ = storage_.data() + ((64 - addr % 64) % 64) + offset;
    std::fill(data_, data_ + count * SizeOf(t), 0);
  }
  Buffer(Buffer&&) = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  unsigned char* data() { return data_; }
  const unsigned char* data() const { return data_; }
  unsigned char* at(size_t i) { return data_ + i * SizeOf(type_); }
  const unsigned char* at(size_t i) const { return data_ + i * SizeOf(type_); }

  Buffer CopyAt(size_t offset) const {
    Buffer c(type_, count_, offset);
    std::memcpy(c.data(), data_, count_ * SizeOf(type_));
    return c;
  }
  Buffer Copy() const { return CopyAt(offset_); }

  bool GuardIntact() const {
    const unsigned char* end = data_ + count_ * SizeOf(type_);
    return std::all_of(data_ - offset_, data_, [](unsigned char c) { return c == kGuard; }) &&
           std::all_of(end, end + 64, [](unsigned char c) { return c == kGuard; });
  }

 private:
  DataType type_;
  size_t count_;
  size_t offset_;
  std::vector<unsigned char> storage_;
  unsigned char* data_;
};

// Random elements with zeros, extremes, infinities, NaNs (quiet and
// signaling) and subnormals mixed in; integers use full-width bit patterns
// so that sums and products wrap.
inline void Fill(DataType t, unsigned char* p, size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> value(-1000.0, 1000.0);
  const size_t es = SizeOf(t);
  for (size_t i = 0; i < n; ++i, p += es) {
    uint64_t bits = rng();
    unsigned kind = static_cast<unsigned>(rng() % 16);
    if (t == DataType::kBool) {
      static constexpr unsigned char kBools[] = {0, 1, 2, 255, 0, 1, 0, 128};
      *p = kBools[kind % 8];
    } else if (!IsFloat(t)) {
      static constexpr int64_t kInts[] = {0, 1, -1, INT64_MIN, INT64_MAX};
      if (kind < 2)
        bits = static_cast<uint64_t>(kInts[bits % 5] >> (64 - 8 * es));  // min/max of type
      StoreInt(t, p, kind < 2 ? bits : (kind < 4 ? bits % 5 - 2 : bits));
    } else if (kind >= 12) {
      std::memcpy(p, &bits, es);  // any pattern: NaN, inf, subnormal, ...
    } else {
      static constexpr double kSpecial[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e-310};
      int scale = t == DataType::kFloat64   ? static_cast<int>(bits % 64) - 32
                  : t == DataType::kFloat32 ? static_cast<int>(bits % 32) - 16
                                            : -3;
      double v = kind < 6 ? kSpecial[kind] : std::ldexp(value(rng), scale);
      if (t == DataType::kFloat64) {
        std::memcpy(p, &v, 8);
      } else {
        StoreFloat32(t, p, kind == 5 ? std::ldexp(1.0f, -140) : static_cast<float>(v));
      }
    }
  }
}

// IEEE 754-2019 minimum / maximum: NaN propagates (the first NaN operand),
// -0 is below +0.
inline double IeeeMin(double x, double y) {
  if (std::isnan(x)) return x;
  if (std::isnan(y)) return y;
  if (x == y) return std::signbit(x) ? x : y;
  return x < y ? x : y;
}
inline double IeeeMax(double x, double y) {
  if (std::isnan(x)) return x;
  if (std::isnan(y)) return y;
  if (x == y) return std::signbit(x) ? y : x;
  return x < y ? y : x;
}

// out = op(a, b) for one element (op is not kAverage).
inline void RefReduce(DataType t, ReduceOp op, const unsigned char* a, const unsigned char* b,
                      unsigned char* out) {
  if (t == DataType::kBool) {
    bool x = *a != 0, y = *b != 0;
    *out = (op == ReduceOp::kSum || op == ReduceOp::kMax) ? (x || y) : (x && y);
  } else if (!IsFloat(t)) {
    int64_t x = LoadInt(t, a), y = LoadInt(t, b);
    auto ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
    uint64_t r = op == ReduceOp::kSum       ? ux + uy
                 : op == ReduceOp::kProduct ? ux * uy
                 : op == ReduceOp::kMin     ? static_cast<uint64_t>(std::min(x, y))
                                            : static_cast<uint64_t>(std::max(x, y));
    StoreInt(t, out, r);
  } else if (t == DataType::kFloat32 || t == DataType::kFloat64) {
    double x = LoadFloat(t, a), y = LoadFloat(t, b);
    double r = op == ReduceOp::kSum       ? x + y
               : op == ReduceOp::kProduct ? x * y
               : op == ReduceOp::kMin     ? IeeeMin(x, y)
                                          : IeeeMax(x, y);
    if (t == DataType::kFloat64) {
      std::memcpy(out, &r, 8);
    } else {
      StoreFloat32(t, out, static_cast<float>(r));  // one rounding of the exact double result
    }
  } else {  // float16, bfloat16: one float32 operation, rounded by half.h
    auto x = static_cast<float>(LoadFloat(t, a)), y = static_cast<float>(LoadFloat(t, b));
    float r = op == ReduceOp::kSum       ? x + y
              : op == ReduceOp::kProduct ? x * y
              : op == ReduceOp::kMin     ? static_cast<float>(IeeeMin(x, y))
                                         : static_cast<float>(IeeeMax(x, y));
    StoreFloat32(t, out, r);
  }
}

// An integer result: round toward zero, saturate, NaN -> 0.
inline uint64_t RefTruncSaturate(DataType t, double v) {
  const int bits = static_cast<int>(8 * SizeOf(t));
  const bool is_unsigned = t == DataType::kUInt8;
  const double lo = is_unsigned ? 0.0 : -std::ldexp(1.0, bits - 1);
  const double hi_excl = std::ldexp(1.0, is_unsigned ? bits : bits - 1);
  if (std::isnan(v)) return 0;
  double r = std::trunc(v);
  if (r >= hi_excl)
    return is_unsigned ? (uint64_t{1} << bits) - 1 : (uint64_t{1} << (bits - 1)) - 1;
  if (r < lo) return is_unsigned ? 0 : uint64_t{1} << (bits - 1);  // low bytes of the minimum
  return static_cast<uint64_t>(static_cast<int64_t>(r));
}

// out = in * factor for one element (rounding rules of include/hora/types.h).
inline void RefScale(DataType t, double factor, const unsigned char* in, unsigned char* out) {
  if (t == DataType::kBool) {
    *out = *in != 0;
  } else if (!IsFloat(t)) {
    StoreInt(t, out, RefTruncSaturate(t, static_cast<double>(LoadInt(t, in)) * factor));
  } else if (t == DataType::kFloat64) {
    double r = LoadFloat(t, in) * factor;
    std::memcpy(out, &r, 8);
  } else if (t == DataType::kFloat32) {
    // float * float is exact in double; one rounding to float.
    double r = LoadFloat(t, in) * static_cast<double>(static_cast<float>(factor));
    StoreFloat32(t, out, static_cast<float>(r));
  } else {
    StoreFloat32(t, out, static_cast<float>(LoadFloat(t, in)) * static_cast<float>(factor));
  }
}

// Bitwise equality of n elements, except that any NaN matches any NaN.
inline ::testing::AssertionResult SameElements(DataType t, const unsigned char* got,
                                               const unsigned char* want, size_t n) {
  const size_t es = SizeOf(t);
  if (n == 0 || std::memcmp(got, want, n * es) == 0) return ::testing::AssertionSuccess();
  size_t wrong = 0;
  std::ostringstream first;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char* g = got + i * es;
    const unsigned char* w = want + i * es;
    if (std::memcmp(g, w, es) == 0) continue;
    if (IsFloat(t) && std::isnan(LoadFloat(t, g)) && std::isnan(LoadFloat(t, w))) continue;
    if (wrong++ < 5) {
      uint64_t gb = 0, wb = 0;
      std::memcpy(&gb, g, es);
      std::memcpy(&wb, w, es);
      first << " [" << i << "] got 0x" << std::hex << gb << " want 0x" << wb << std::dec;
      if (IsFloat(t))
        first << " (" << LoadFloat(t, g) << " vs " << LoadFloat(t, w) << ")";
      else
        first << " (" << LoadInt(t, g) << " vs " << LoadInt(t, w) << ")";
    }
  }
  if (wrong == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << wrong << " of " << n << " " << TypeName(t) << " elements wrong;" << first.str();
}

}  // namespace hora::kernels::test
