// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "kernels/adasum.h"

#include <cassert>
#include <cstdint>

#include "kernels/half.h"

namespace hora::kernels {
namespace {

// Loads and stores of one floating dtype, through double.
struct F32 {
  using S = float;
  static double Load(S v) { return v; }
  static S Store(double v) { return static_cast<S>(v); }
};
struct F64 {
  using S = double;
  static double Load(S v) { return v; }
  static S Store(double v) { return v; }
};
struct F16 {
  using S = uint16_t;
  static double Load(S v) { return Float16ToFloat(v); }
  static S Store(double v) { return FloatToFloat16(static_cast<float>(v)); }
};
struct BF16 {
  using S = uint16_t;
  static double Load(S v) { return BFloat16ToFloat(v); }
  static S Store(double v) { return FloatToBFloat16(static_cast<float>(v)); }
};

template <class C>
AdasumDots Dots(const void* a, const void* b, size_t n) {
  const auto* x = static_cast<const typename C::S*>(a);
  const auto* y = static_cast<const typename C::S*>(b);
  AdasumDots d;
  for (size_t i = 0; i < n; ++i) {
    const double u = C::Load(x[i]);
    const double v = C::Load(y[i]);
    d.ab += u * v;
    d.aa += u * u;
    d.bb += v * v;
  }
  return d;
}

template <class C>
void Combine(double ca, double cb, void* a, const void* b, size_t n) {
  auto* x = static_cast<typename C::S*>(a);
  const auto* y = static_cast<const typename C::S*>(b);
  for (size_t i = 0; i < n; ++i) x[i] = C::Store(ca * C::Load(x[i]) + cb * C::Load(y[i]));
}

}  // namespace

AdasumDots AdasumDotProducts(DataType dtype, const void* a, const void* b, size_t count) {
  switch (dtype) {
    case DataType::kFloat32:
      return Dots<F32>(a, b, count);
    case DataType::kFloat64:
      return Dots<F64>(a, b, count);
    case DataType::kFloat16:
      return Dots<F16>(a, b, count);
    case DataType::kBFloat16:
      return Dots<BF16>(a, b, count);
    default:
      break;
  }
  assert(false && "Adasum: floating types only");
  return {};
}

void AdasumCoefficients(const AdasumDots& d, double* ca, double* cb) {
  *ca = d.aa > 0 ? 1.0 - d.ab / (2.0 * d.aa) : 1.0;
  *cb = d.bb > 0 ? 1.0 - d.ab / (2.0 * d.bb) : 1.0;
}

void AdasumCombine(DataType dtype, double ca, double cb, void* a, const void* b, size_t count) {
  switch (dtype) {
    case DataType::kFloat32:
      return Combine<F32>(ca, cb, a, b, count);
    case DataType::kFloat64:
      return Combine<F64>(ca, cb, a, b, count);
    case DataType::kFloat16:
      return Combine<F16>(ca, cb, a, b, count);
    case DataType::kBFloat16:
      return Combine<BF16>(ca, cb, a, b, count);
    default:
      break;
  }
  assert(false && "Adasum: floating types only");
}

}  // namespace hora::kernels
