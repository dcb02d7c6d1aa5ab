// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Element-wise reduction kernels for every DataType x ReduceOp (semantics in
// include/hora/types.h). These are the only functions of Hora that touch
// element values; collectives move bytes and call these.
//
// Vectorized for the CPU the program runs on, not for the build machine: each
// kernel is compiled for x86-64-v4 (AVX-512), x86-64-v3 (AVX2, F16C) and the
// baseline, and every call runs the widest body the CPU's feature bits allow
// (kernels/isa.h).
// float16 and bfloat16 compute in float32 and round to nearest even on store.
//
// Floating min/max are IEEE 754-2019 minimum/maximum: a NaN operand gives
// NaN, and -0 is below +0. An integer Scale whose product is NaN (NaN
// factor, or 0 * infinity) gives 0.
//
// Preconditions (checked by callers, asserted here): `op` is not kAverage for
// Reduce/Reduce3 (average reduces as kSum and divides in Finalize); bool is
// never given a scale factor or kAverage. Buffers of the same call may alias
// exactly (dst == a) but must not partially overlap. Any address works;
// buffers aligned to their element size take the fast paths. Thread-safe: no
// state.
//
// Reduce3 writes an output of 1 MiB or more that aliases no input with
// streaming (cache-bypassing) stores on x86-64-v3/v4, as memcpy does for
// large copies (docs/dev/performance.md).
#pragma once

#include <cstddef>

#include "hora/types.h"

namespace hora::kernels {

// dst[i] = op(dst[i], src[i]) for i in [0, count).
void Reduce(DataType dtype, ReduceOp op, void* dst, const void* src, size_t count);

// dst[i] = op(a[i], b[i]) for i in [0, count). dst may equal a or b.
void Reduce3(DataType dtype, ReduceOp op, void* dst, const void* a, const void* b, size_t count);

// dst[i] = src[i] * factor (rounding rules in types.h). dst may equal src.
void Scale(DataType dtype, double factor, void* dst, const void* src, size_t count);

// Turns a reduced sum into the final result in place:
//  - kAverage: floating types multiply by postscale / world_size in one pass;
//    integer types divide by world_size (toward zero), then apply postscale.
//  - other ops: multiply by postscale.
// A no-op when there is nothing to do (postscale 1 and not kAverage).
void Finalize(DataType dtype, ReduceOp op, int world_size, double postscale, void* data,
              size_t count);

// True when Finalize(dtype, op, world_size, postscale, ...) would change data.
bool NeedsFinalize(DataType dtype, ReduceOp op, int world_size, double postscale);

}  // namespace hora::kernels
