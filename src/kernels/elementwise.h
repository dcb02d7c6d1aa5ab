// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Private building blocks of the reduction kernels: per-element operations,
// storage codecs and the loops that apply them.
//
// Everything here is always_inline: it is compiled into each instruction-set
// variant of the entry functions (reduce.cc, scale.cc) and auto-vectorized
// there for that variant's vector width. Loops walk whole blocks of a
// constant element count plus a scalar tail: GCC's -O2 "very cheap" cost
// model vectorizes only loops whose trip count is a multiple of the vector
// length, and a constant-count inner loop is.
//
// A loop's pointers are __restrict: callers route exact aliasing (dst == a)
// to the in-place loops and reject partial overlap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/half.h"

#if defined(__CUDACC__)
// The GPU's kernels (src/gpu/cuda/) instantiate these same functions.
#define HORA_KERNEL_INLINE __forceinline__ __host__ __device__
#define HORA_KERNEL_LAMBDA
#else
#define HORA_KERNEL_INLINE __attribute__((always_inline)) inline
// For lambdas, whose attributes follow the parameter list.
#define HORA_KERNEL_LAMBDA __attribute__((always_inline))
#endif

namespace hora::kernels::internal {

template <class To, class From>
HORA_KERNEL_INLINE To BitCast(From from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}

// Returns `x` unchanged, but the optimizer no longer knows its value. Used
// for loop-invariant bounds: when a clamp yields a known constant, GCC's
// partial-redundancy elimination folds the rest of the element's
// computation on that path and leaves branches the vectorizer rejects.
HORA_KERNEL_INLINE double Opaque(double x) {
#if defined(__CUDA_ARCH__)
  // (Device code: nothing to hide from the vectorizer.)
#elif defined(__x86_64__)
  __asm__("" : "+x"(x));
#else
  __asm__("" : "+r"(x));
#endif
  return x;
}

// Elements per constant-count block.
template <class S>
inline constexpr size_t kBlock = 256 / sizeof(S);

// Elements per chunk of the paths that stage data in a stack buffer
// (misaligned buffers, float16 converted with F16C).
inline constexpr size_t kChunk = 256;

// Calls body(i) for i in [0, n): whole blocks of kB, then the tail.
template <size_t kB, class Body>
HORA_KERNEL_INLINE void ForEachIndex(size_t n, Body&& body) {
  size_t i = 0;
  for (; i + kB <= n; i += kB) {
    for (size_t j = 0; j < kB; ++j) body(i + j);
  }
  for (; i < n; ++i) body(i);
}

// ---------------------------------------------------------------------------
// Element operations on the compute type: integers wrap, bool is OR / AND,
// floating min/max are IEEE 754-2019 minimum/maximum (NaN propagates, -0 is
// below +0).

// Integer sum and product wrap: computed in an unsigned type at least as wide
// as unsigned int (so that uint16 * uint16 does not promote to signed int).
template <class T>
using WrapType =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <class F>
using FloatBits = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;

struct SumOp {
  template <class T>
  static HORA_KERNEL_INLINE T Apply(T a, T b) {
    if constexpr (std::is_same_v<T, bool>) {
      return a | b;
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrapType<T>>(a) + static_cast<WrapType<T>>(b));
    } else {
      return a + b;
    }
  }
};

struct ProductOp {
  template <class T>
  static HORA_KERNEL_INLINE T Apply(T a, T b) {
    if constexpr (std::is_same_v<T, bool>) {
      return a & b;
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrapType<T>>(a) * static_cast<WrapType<T>>(b));
    } else {
      return a * b;
    }
  }
};

struct MinOp {
  template <class T>
  static HORA_KERNEL_INLINE T Apply(T a, T b) {
    if constexpr (std::is_same_v<T, bool>) {
      return a & b;
    } else if constexpr (std::is_integral_v<T>) {
      return b < a ? b : a;
    } else {
      using Bits = FloatBits<T>;
      T m = a < b ? a : b;  // b when b is NaN
      // Equal values: only +0 / -0 differ, and OR of the bits keeps the sign.
      m = a == b ? BitCast<T>(static_cast<Bits>(BitCast<Bits>(a) | BitCast<Bits>(b))) : m;
      return a != a ? a : m;
    }
  }
};

struct MaxOp {
  template <class T>
  static HORA_KERNEL_INLINE T Apply(T a, T b) {
    if constexpr (std::is_same_v<T, bool>) {
      return a | b;
    } else if constexpr (std::is_integral_v<T>) {
      return a < b ? b : a;
    } else {
      using Bits = FloatBits<T>;
      T m = a > b ? a : b;
      m = a == b ? BitCast<T>(static_cast<Bits>(BitCast<Bits>(a) & BitCast<Bits>(b))) : m;
      return a != a ? a : m;
    }
  }
};

// ---------------------------------------------------------------------------
// Codecs: how elements are stored and in which type they are computed.

template <class T>
struct NativeCodec {
  using Storage = T;
  using Compute = T;
  static HORA_KERNEL_INLINE T Load(T x) { return x; }
  static HORA_KERNEL_INLINE T Store(T x) { return x; }
};

// bool: one byte, nonzero is true; results are stored as 0 or 1.
struct BoolCodec {
  using Storage = uint8_t;
  using Compute = bool;
  static HORA_KERNEL_INLINE bool Load(uint8_t x) { return x != 0; }
  static HORA_KERNEL_INLINE uint8_t Store(bool x) { return static_cast<uint8_t>(x); }
};

struct BFloat16Codec {
  using Storage = uint16_t;
  using Compute = float;
  static HORA_KERNEL_INLINE float Load(uint16_t x) { return BFloat16ToFloat(x); }
  static HORA_KERNEL_INLINE uint16_t Store(float x) { return FloatToBFloat16(x); }
};

// Scalar float16; the x86-64-v3/v4 variants convert whole blocks with F16C
// instead (x86_simd.h), bit-identically.
struct Float16Codec {
  using Storage = uint16_t;
  using Compute = float;
  static HORA_KERNEL_INLINE float Load(uint16_t x) { return Float16ToFloat(x); }
  static HORA_KERNEL_INLINE uint16_t Store(float x) { return FloatToFloat16(x); }
};

// ---------------------------------------------------------------------------
// Loops. S is the storage type, n the element count.

// dst[i] = op(a[i], b[i]); the three buffers are distinct (a may equal b).
template <class Codec, class Op, class S = typename Codec::Storage>
HORA_KERNEL_INLINE void Binary3(S* __restrict dst, const S* __restrict a, const S* __restrict b,
                                size_t n) {
  ForEachIndex<kBlock<S>>(n, [&](size_t i) HORA_KERNEL_LAMBDA {
    dst[i] = Codec::Store(Op::Apply(Codec::Load(a[i]), Codec::Load(b[i])));
  });
}

// dst[i] = op(dst[i], src[i]), or op(src[i], dst[i]) when kSrcFirst (the
// order matters only for which NaN payload survives).
template <class Codec, class Op, bool kSrcFirst, class S = typename Codec::Storage>
HORA_KERNEL_INLINE void BinaryInPlace(S* __restrict dst, const S* __restrict src, size_t n) {
  ForEachIndex<kBlock<S>>(n, [&](size_t i) HORA_KERNEL_LAMBDA {
    auto d = Codec::Load(dst[i]);
    auto s = Codec::Load(src[i]);
    dst[i] = Codec::Store(kSrcFirst ? Op::Apply(s, d) : Op::Apply(d, s));
  });
}

// dst[i] = op(dst[i], dst[i]).
template <class Codec, class Op, class S = typename Codec::Storage>
HORA_KERNEL_INLINE void BinarySelf(S* dst, size_t n) {
  ForEachIndex<kBlock<S>>(n, [&](size_t i) HORA_KERNEL_LAMBDA {
    auto d = Codec::Load(dst[i]);
    dst[i] = Codec::Store(Op::Apply(d, d));
  });
}

// dst[i] = f(src[i]) on the compute type; dst and src distinct.
template <class Codec, class F, class S = typename Codec::Storage>
HORA_KERNEL_INLINE void Unary(S* __restrict dst, const S* __restrict src, size_t n, F f) {
  ForEachIndex<kBlock<S>>(
      n, [&](size_t i) HORA_KERNEL_LAMBDA { dst[i] = Codec::Store(f(Codec::Load(src[i]))); });
}

template <class Codec, class F, class S = typename Codec::Storage>
HORA_KERNEL_INLINE void UnaryInPlace(S* dst, size_t n, F f) {
  ForEachIndex<kBlock<S>>(
      n, [&](size_t i) HORA_KERNEL_LAMBDA { dst[i] = Codec::Store(f(Codec::Load(dst[i]))); });
}

// ---------------------------------------------------------------------------
// Pointer checks.

template <class S>
HORA_KERNEL_INLINE bool IsAligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % alignof(S) == 0;
}

// True when [a, a + bytes) and [b, b + bytes) overlap without being equal.
inline bool PartiallyOverlap(const void* a, const void* b, size_t bytes) {
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  return x != y && x < y + bytes && y < x + bytes;
}

// ---------------------------------------------------------------------------
// Integer scaling: x * factor rounded toward zero (C++'s conversion, as
// Horovod's kernels do), saturated to T's range. `factor` must be finite
// (the caller handles infinities and NaN); lo/hi are T's range as doubles,
// passed through Opaque() by the caller (see there).
template <class T>
HORA_KERNEL_INLINE T TruncToIntSaturated(double v, double lo, double hi) {
  double c = v >= lo ? v : lo;
  c = c <= hi ? c : hi;
  if constexpr (sizeof(T) < 8) {
    return static_cast<T>(c);  // in range: the conversion truncates
  } else {
    // 64-bit: hi is 2^63 or 2^64, just above the largest value (not a T).
    constexpr T kMax = std::numeric_limits<T>::max();
    const bool over = c >= hi;
    return over ? kMax : static_cast<T>(over ? 0.0 : c);
  }
}

// T's range for TruncToIntSaturated (64-bit types: 2^63 / 2^64 as upper bound).
template <class T>
constexpr double kIntLo = static_cast<double>(std::numeric_limits<T>::min());
template <class T>
constexpr double kIntHi = sizeof(T) == 8 ? (std::is_signed_v<T> ? 0x1p63 : 0x1p64)
                                         : static_cast<double>(std::numeric_limits<T>::max());

}  // namespace hora::kernels::internal
