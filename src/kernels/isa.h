// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Instruction-set variants of the reduction kernels (private to kernels/ and
// their tests). Each kernel is compiled once per variant; the public entry
// points of reduce.h run the best variant the CPU supports, decided at each
// call from the CPU's feature bits (a few loads, no state of our own).
//
// Tests call the *With functions to check every variant the machine can run
// against the same reference.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hora/types.h"

namespace hora::kernels::internal {

enum class Isa : uint8_t {
  kBaseline = 0,  // whatever the build targets (x86-64 v1 on x86)
  kX86V3,         // x86-64-v3: AVX2, FMA, F16C, BMI2
  kX86V4,         // x86-64-v4: AVX-512 F/BW/CD/DQ/VL
};

inline constexpr Isa kAllIsas[] = {Isa::kBaseline, Isa::kX86V3, Isa::kX86V4};

// The widest variant the running CPU (and OS) supports.
Isa BestIsa();
bool IsaSupported(Isa isa);
const char* IsaName(Isa isa);

// reduce.h's functions, run with a given variant (which must be supported).
void ReduceWith(Isa isa, DataType dtype, ReduceOp op, void* dst, const void* src, size_t count);
void Reduce3With(Isa isa, DataType dtype, ReduceOp op, void* dst, const void* a, const void* b,
                 size_t count);
void ScaleWith(Isa isa, DataType dtype, double factor, void* dst, const void* src, size_t count);
void FinalizeWith(Isa isa, DataType dtype, ReduceOp op, int world_size, double postscale,
                  void* data, size_t count);
// copy.h's CopyStreaming, run with a given variant.
void CopyStreamingWith(Isa isa, void* dst, const void* src, size_t bytes);

}  // namespace hora::kernels::internal
