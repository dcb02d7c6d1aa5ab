// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Element types and reduction operations.
//
// Semantics of each reduction, for every DataType:
//
//   op        floating types (f16, bf16, f32, f64)   integer types              bool
//   --------  -------------------------------------  -------------------------  ---------------
//   kSum      sum                                     sum, wrapping modulo 2^b   logical OR
//   kAverage  sum / world_size                        see below                  rejected
//   kMin      minimum                                 minimum                    logical AND
//   kMax      maximum                                 maximum                    logical OR
//   kProduct  product                                 product, wrapping          logical AND
//
// float16 and bfloat16 are reduced in float32 and rounded back to the storage
// type (round to nearest even) each time a partial result is stored.
//
// Average on integer types: the wrapped sum divided by the number of ranks,
// rounded toward zero (C++ integer division), e.g. the average of int32
// {1, 2} over 2 ranks is 1 and of {-1, -2} is -1. (Horovod multiplies the
// sum by 1.0 / n in float64, which can come out one short: its average of a
// sum of 49 over 49 ranks is 0. Hora's is exact.)
//
// Scale factors: prescale_factor multiplies every input element before it is
// reduced; postscale_factor multiplies the result. Floating types finish
// kAverage and postscale_factor in one multiply by postscale_factor /
// world_size, the factor rounded once to float32 for f16, bf16 and f32 (it
// can differ from a true division in the last bit), the product computed in
// float64 (f64) or float32 (f16, bf16, f32). Integer types apply each factor
// in float64 and round toward zero, as Horovod does (an int32 7 with prescale
// 0.5 is 3, -7 is -3), saturating at the type's range (where Horovod's result
// is undefined); kAverage with a postscale_factor first divides (above), then
// scales: the average of int32 {1, 2} with postscale 3 is 1 * 3 = 3 (Horovod's
// multiplies the sum by 3 / 2: 4).
// bool accepts no scale factor other than 1.
//
// Ranks always receive bitwise-identical results: every algorithm reduces each
// element in one order and distributes that single result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hora {

enum class DataType : uint8_t {
  kUInt8 = 0,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kBool,  // one byte per element, 0 = false, any other value = true
};

inline constexpr DataType kAllDataTypes[] = {
    DataType::kUInt8,   DataType::kInt8,    DataType::kInt16,    DataType::kInt32,
    DataType::kInt64,   DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
    DataType::kFloat64, DataType::kBool,
};

// Bytes per element.
size_t DataTypeSize(DataType t);
// "float32", "bfloat16", ...
const char* DataTypeName(DataType t);
// Accepts the names above and the short forms u8 i8 i16 i32 i64 f16 bf16 f32 f64.
std::optional<DataType> ParseDataType(std::string_view name);
bool IsFloatingPoint(DataType t);
bool IsInteger(DataType t);  // false for bool and floating types

enum class ReduceOp : uint8_t {
  kSum = 0,
  kAverage,
  kMin,
  kMax,
  kProduct,
  // Adasum (Maleki et al., "Adaptive Summation of Gradients"): not
  // element-wise. Two ranks' vectors a and b combine into
  //   (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
  // (a coefficient is 1 where its vector is zero), the dot
  // products over the whole tensor in float64; ranks combine pairwise in
  // log2(n) rounds, rank r with r ^ 2^k in round k, so the result is the
  // binary tree of those combinations over ranks 0..n-1, bitwise identical
  // on every rank. Floating types only; n must be a power of two (as
  // Horovod's CPU Adasum). Scale factors apply before and after.
  kAdasum,
};

// The element-wise ops (every op but kAdasum).
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                                             ReduceOp::kMax, ReduceOp::kProduct};

// "sum", "average", "min", "max", "product", "adasum".
const char* ReduceOpName(ReduceOp op);
std::optional<ReduceOp> ParseReduceOp(std::string_view name);

// A reduction with its scale factors (see the table above).
struct Reduction {
  ReduceOp op = ReduceOp::kSum;
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;

  bool operator==(const Reduction&) const = default;
};

}  // namespace hora
