// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Independent references for the collective tests: deterministic inputs per
// (rank, seed), the expected reduction computed element by element in a
// wider type (double for floating types, wrapping unsigned arithmetic for
// integers), and a comparison that reports the first wrong elements.
//
// Tolerance for floating types (stated here, used by Compare): with n ranks
// and unit roundoff u of the storage type (2^-11 f16, 2^-8 bf16, 2^-24 f32,
// 2^-53 f64), sum/average may differ from the exact result by at most
// (n + 2) * u * sum_i |x_i| (scaled like the result), product by
// (n + 2) * u * |result|; min/max without postscale must be exact. Integer and
// bool results must be exact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hora/types.h"

namespace hora::testing {

// The unit roundoff of a floating type: 2^-11 f16, 2^-8 bf16, 2^-24 f32,
// 2^-53 f64.
double UnitRoundoff(DataType dtype);

// Fills `count` elements of `dtype` with values suited to `op` (small values
// for products, full-range bit patterns for integer sums so wrapping is
// exercised), deterministic in (seed, rank).
void FillInput(DataType dtype, ReduceOp op, void* data, size_t count, uint64_t seed, int rank);

struct Expected {
  DataType dtype;
  std::vector<uint8_t> exact;  // integer and bool types: expected bytes
  std::vector<double> value;   // floating types: expected value
  std::vector<double> tolerance;
};

// The allreduce of `inputs` (one buffer of `count` elements per rank).
Expected ReferenceAllreduce(DataType dtype, const Reduction& reduction,
                            const std::vector<const void*>& inputs, size_t count);

// "" when `got` matches; otherwise "N wrong of M; first: [i] got G expected E (tol T)...".
std::string Compare(const Expected& expected, const void* got, size_t offset, size_t count);

// Compare against the allreduce over `n` ranks of FillInput(dtype,
// reduction.op, ..., seed, rank) inputs: "" when `got` matches.
std::string CompareFilledAllreduce(int n, DataType dtype, const Reduction& reduction, uint64_t seed,
                                   const void* got, size_t count);

// `bytes` bytes deterministic in (rank, salt), for collectives that move
// bytes without reducing them.
std::vector<uint8_t> BytePattern(size_t bytes, int rank, uint64_t salt);

// An alltoall case: rank p sends rows(p, q) rows of `row_bytes` to rank q.
// Fills inputs[p] (BytePattern of its whole send buffer, salted) and
// splits[p] (the rows to each rank) for n ranks.
void MakeAlltoallInputs(int n, const std::function<int64_t(int, int)>& rows, size_t row_bytes,
                        uint64_t salt, std::vector<std::vector<uint8_t>>* inputs,
                        std::vector<std::vector<int64_t>>* splits);
// What rank r receives in that case: each rank's block for r, in rank order.
std::vector<uint8_t> AlltoallExpected(int n, const std::function<int64_t(int, int)>& rows,
                                      size_t row_bytes,
                                      const std::vector<std::vector<uint8_t>>& inputs, int r);

// memcmp that accepts empty (possibly null) ranges.
bool SameBytes(const void* a, const void* b, size_t n);

// Element i of a buffer as double (for messages and float references).
double ElementAsDouble(DataType dtype, const void* data, size_t i);

}  // namespace hora::testing
