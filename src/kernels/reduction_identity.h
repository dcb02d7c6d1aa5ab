// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The identity element of a reduction: what a rank that has no data (a
// joined rank, docs/dev/design.md §4) contributes so that the others' result is
// unchanged. Sum and average: 0; product: 1; min: the largest value (+inf
// for floating types); max: the smallest (-inf); bool: false for sum and
// max, true for min and product.
#pragma once

#include <cstddef>

#include "hora/types.h"

namespace hora::kernels {

// Fills `count` elements of `dtype` at `data` with the identity of `op`.
void FillIdentity(DataType dtype, ReduceOp op, void* data, size_t count);

}  // namespace hora::kernels
