// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Adasum's combination of two vectors (semantics in include/hora/types.h,
// ReduceOp::kAdasum): the dot products, then
//   a <- ca * a + cb * b,  ca = 1 - a.b / (2 |a|^2),  cb = 1 - a.b / (2 |b|^2)
// (a coefficient is 1 when its vector is zero). Floating types only;
// float16 and bfloat16 are widened to float32 per element, every dot product
// accumulates in float64 and the combination is computed in float64, then
// rounded once to the storage type. The combination is symmetric in a and b,
// bit for bit, so two partners that each combine (mine, theirs) agree.
// Scalar loops: Adasum is a niche op; these are not vectorized.
#pragma once

#include <cstddef>

#include "hora/types.h"

namespace hora::kernels {

struct AdasumDots {
  double ab = 0;  // a.b
  double aa = 0;  // |a|^2
  double bb = 0;  // |b|^2
};

// The three dot products of a and b (count elements of dtype).
AdasumDots AdasumDotProducts(DataType dtype, const void* a, const void* b, size_t count);

// ca and cb from the dot products (1 for a zero vector).
void AdasumCoefficients(const AdasumDots& dots, double* ca, double* cb);

// a[i] = ca * a[i] + cb * b[i] for i in [0, count).
void AdasumCombine(DataType dtype, double ca, double cb, void* a, const void* b, size_t count);

}  // namespace hora::kernels
