// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Scale, Finalize and NeedsFinalize (reduce.h). Rounding rules in
// include/hora/types.h: floating types multiply in float32 (f16, bf16, f32)
// or float64; integers multiply in float64, round toward zero and
// saturate. A NaN product gives 0 for integers.
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/elementwise.h"
#include "kernels/isa.h"
#include "kernels/reduce.h"
#include "kernels/x86_simd.h"

namespace hora::kernels {
namespace internal {
namespace {

template <class Codec, class F>
void BouncedMap(void* dst, const void* src, size_t n, F f) {
  using S = typename Codec::Storage;
  alignas(64) S x[kChunk];
  for (size_t i = 0; i < n; i += kChunk) {
    size_t m = n - i < kChunk ? n - i : kChunk;
    size_t offset = i * sizeof(S);
    std::memcpy(x, static_cast<const char*>(src) + offset, m * sizeof(S));
    UnaryInPlace<Codec>(x, m, f);
    std::memcpy(static_cast<char*>(dst) + offset, x, m * sizeof(S));
  }
}

// dst[i] = Store(f(Load(src[i]))); dst may equal src.
template <Isa kIsa, class Codec, class F>
HORA_KERNEL_INLINE void MapTyped(void* dst_v, const void* src_v, size_t n, F f) {
  using S = typename Codec::Storage;
  assert(!PartiallyOverlap(dst_v, src_v, n * sizeof(S)) && "Scale: dst partially overlaps src");
  if (!IsAligned<S>(dst_v) || !IsAligned<S>(src_v)) {
    BouncedMap<Codec>(dst_v, src_v, n, f);
    return;
  }
  auto* dst = static_cast<S*>(dst_v);
  const auto* src = static_cast<const S*>(src_v);
  if constexpr (kIsa != Isa::kBaseline && std::is_same_v<Codec, Float16Codec>) {
    alignas(64) float x[kChunk];
    for (size_t i = 0; i < n; i += kChunk) {
      size_t m = n - i < kChunk ? n - i : kChunk;
      F16ToF32<kIsa>(x, src + i, m);
      UnaryInPlace<NativeCodec<float>>(x, m, f);
      F32ToF16<kIsa>(dst + i, x, m);
    }
  } else if (dst == src) {
    UnaryInPlace<Codec>(dst, n, f);
  } else {
    Unary<Codec>(dst, src, n, f);
  }
}

// Infinite or NaN factor (cold): the saturation sign, 0 for NaN and 0 * inf.
template <class T>
void ScaleIntNonFinite(double factor, void* dst, const void* src, size_t n) {
  constexpr T kMin = std::numeric_limits<T>::min();
  constexpr T kMax = std::numeric_limits<T>::max();
  MapTyped<Isa::kBaseline, NativeCodec<T>>(dst, src, n, [factor](T x) {
    double v = static_cast<double>(x) * factor;
    return v != v ? T{0} : (v > 0 ? kMax : kMin);
  });
}

template <Isa kIsa, class T>
HORA_KERNEL_INLINE void ScaleInt(double factor, void* dst, const void* src, size_t n) {
  if (!std::isfinite(factor)) {
    ScaleIntNonFinite<T>(factor, dst, src, n);
    return;
  }
  double lo = Opaque(kIntLo<T>);
  double hi = Opaque(kIntHi<T>);
  MapTyped<kIsa, NativeCodec<T>>(dst, src, n, [=](T x) HORA_KERNEL_LAMBDA {
    return TruncToIntSaturated<T>(static_cast<double>(x) * factor, lo, hi);
  });
}

template <Isa kIsa, class Codec>
HORA_KERNEL_INLINE void ScaleFloat(double factor, void* dst, const void* src, size_t n) {
  using C = typename Codec::Compute;  // float for f16, bf16 and f32
  auto f = static_cast<C>(factor);
  MapTyped<kIsa, Codec>(dst, src, n, [f](C x) HORA_KERNEL_LAMBDA { return x * f; });
}

template <Isa kIsa>
HORA_KERNEL_INLINE void ScaleBody(DataType dtype, double factor, void* dst, const void* src,
                                  size_t n) {
  switch (dtype) {
    case DataType::kUInt8:
      return ScaleInt<kIsa, uint8_t>(factor, dst, src, n);
    case DataType::kInt8:
      return ScaleInt<kIsa, int8_t>(factor, dst, src, n);
    case DataType::kInt16:
      return ScaleInt<kIsa, int16_t>(factor, dst, src, n);
    case DataType::kInt32:
      return ScaleInt<kIsa, int32_t>(factor, dst, src, n);
    case DataType::kInt64:
      return ScaleInt<kIsa, int64_t>(factor, dst, src, n);
    case DataType::kFloat16:
      return ScaleFloat<kIsa, Float16Codec>(factor, dst, src, n);
    case DataType::kBFloat16:
      return ScaleFloat<kIsa, BFloat16Codec>(factor, dst, src, n);
    case DataType::kFloat32:
      return ScaleFloat<kIsa, NativeCodec<float>>(factor, dst, src, n);
    case DataType::kFloat64:
      return ScaleFloat<kIsa, NativeCodec<double>>(factor, dst, src, n);
    case DataType::kBool:
      assert(factor == 1.0 && "Scale: bool accepts no scale factor other than 1");
      return MapTyped<kIsa, BoolCodec>(dst, src, n, [](bool x) HORA_KERNEL_LAMBDA { return x; });
  }
  assert(false && "Scale: unknown DataType");
}

void ScaleBaseline(DataType dtype, double factor, void* dst, const void* src, size_t n) {
  ScaleBody<Isa::kBaseline>(dtype, factor, dst, src, n);
}

HORA_TARGET_X86V3 void ScaleX86V3(DataType dtype, double factor, void* dst, const void* src,
                                  size_t n) {
  ScaleBody<Isa::kX86V3>(dtype, factor, dst, src, n);
}

HORA_TARGET_X86V4 void ScaleX86V4(DataType dtype, double factor, void* dst, const void* src,
                                  size_t n) {
  ScaleBody<Isa::kX86V4>(dtype, factor, dst, src, n);
}

// data[i] /= world_size, rounding toward zero (integer types only).
template <class T>
void DivideInt(int world_size, void* data, size_t n) {
  using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  auto divisor = static_cast<Wide>(world_size);
  MapTyped<Isa::kBaseline, NativeCodec<T>>(
      data, data, n, [divisor](T x) { return static_cast<T>(static_cast<Wide>(x) / divisor); });
}

void DivideIntBody(DataType dtype, int world_size, void* data, size_t n) {
  switch (dtype) {
    case DataType::kUInt8:
      return DivideInt<uint8_t>(world_size, data, n);
    case DataType::kInt8:
      return DivideInt<int8_t>(world_size, data, n);
    case DataType::kInt16:
      return DivideInt<int16_t>(world_size, data, n);
    case DataType::kInt32:
      return DivideInt<int32_t>(world_size, data, n);
    case DataType::kInt64:
      return DivideInt<int64_t>(world_size, data, n);
    default:
      assert(false && "Finalize: average of a non-integer type");
  }
}

bool IsFloatType(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ||
         dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
}

}  // namespace

void ScaleWith(Isa isa, DataType dtype, double factor, void* dst, const void* src, size_t count) {
  assert(IsaSupported(isa));
  assert(count == 0 || (dst != nullptr && src != nullptr));
  if (count == 0) return;
  if (isa == Isa::kX86V4) {
    ScaleX86V4(dtype, factor, dst, src, count);
  } else if (isa == Isa::kX86V3) {
    ScaleX86V3(dtype, factor, dst, src, count);
  } else {
    ScaleBaseline(dtype, factor, dst, src, count);
  }
}

void FinalizeWith(Isa isa, DataType dtype, ReduceOp op, int world_size, double postscale,
                  void* data, size_t count) {
  if (!NeedsFinalize(dtype, op, world_size, postscale)) return;
  bool average = op == ReduceOp::kAverage && world_size != 1;
  if (IsFloatType(dtype)) {
    // One pass; the factor is rounded once (to float32 for f16/bf16/f32).
    double factor = average ? postscale / world_size : postscale;
    ScaleWith(isa, dtype, factor, data, data, count);
    return;
  }
  if (average && count != 0) DivideIntBody(dtype, world_size, data, count);
  if (postscale != 1.0) ScaleWith(isa, dtype, postscale, data, data, count);
}

}  // namespace internal

void Scale(DataType dtype, double factor, void* dst, const void* src, size_t count) {
  internal::ScaleWith(internal::BestIsa(), dtype, factor, dst, src, count);
}

void Finalize(DataType dtype, ReduceOp op, int world_size, double postscale, void* data,
              size_t count) {
  internal::FinalizeWith(internal::BestIsa(), dtype, op, world_size, postscale, data, count);
}

bool NeedsFinalize(DataType dtype, ReduceOp op, int world_size, double postscale) {
  assert(world_size >= 1);
  if (dtype == DataType::kBool) {
    assert(op != ReduceOp::kAverage && postscale == 1.0 &&
           "bool accepts neither kAverage nor a scale factor");
    return false;
  }
  return (op == ReduceOp::kAverage && world_size != 1) || postscale != 1.0;
}

}  // namespace hora::kernels
