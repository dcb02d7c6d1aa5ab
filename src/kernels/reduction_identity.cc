// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "kernels/reduction_identity.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

namespace hora::kernels {
namespace {

enum class Kind { kZero, kOne, kHighest, kLowest };

Kind KindOf(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
    case ReduceOp::kAdasum:  // Adasum(a, 0) = a
      return Kind::kZero;
    case ReduceOp::kProduct:
      return Kind::kOne;
    case ReduceOp::kMin:
      return Kind::kHighest;
    case ReduceOp::kMax:
      return Kind::kLowest;
  }
  return Kind::kZero;
}

template <typename T>
T Value(Kind k) {
  switch (k) {
    case Kind::kZero:
      return T(0);
    case Kind::kOne:
      return T(1);
    case Kind::kHighest:
      return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::max();
    case Kind::kLowest:
      return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::lowest();
  }
  return T(0);
}

// float16 / bfloat16 bit patterns of 0, 1, +inf, -inf.
uint16_t HalfBits(Kind k, bool bfloat) {
  switch (k) {
    case Kind::kZero:
      return 0;
    case Kind::kOne:
      return bfloat ? 0x3F80 : 0x3C00;
    case Kind::kHighest:
      return bfloat ? 0x7F80 : 0x7C00;
    case Kind::kLowest:
      return bfloat ? 0xFF80 : 0xFC00;
  }
  return 0;
}

template <typename T>
void Fill(void* data, size_t count, T v) {
  std::fill_n(static_cast<T*>(data), count, v);
}

}  // namespace

void FillIdentity(DataType dtype, ReduceOp op, void* data, size_t count) {
  if (count == 0) return;
  const Kind k = KindOf(op);
  switch (dtype) {
    case DataType::kUInt8:
      return Fill(data, count, Value<uint8_t>(k));
    case DataType::kInt8:
      return Fill(data, count, Value<int8_t>(k));
    case DataType::kInt16:
      return Fill(data, count, Value<int16_t>(k));
    case DataType::kInt32:
      return Fill(data, count, Value<int32_t>(k));
    case DataType::kInt64:
      return Fill(data, count, Value<int64_t>(k));
    case DataType::kFloat32:
      return Fill(data, count, Value<float>(k));
    case DataType::kFloat64:
      return Fill(data, count, Value<double>(k));
    case DataType::kFloat16:
      return Fill(data, count, HalfBits(k, false));
    case DataType::kBFloat16:
      return Fill(data, count, HalfBits(k, true));
    case DataType::kBool:
      return Fill(data, count,
                  static_cast<uint8_t>(k == Kind::kOne || k == Kind::kHighest ? 1 : 0));
  }
}

}  // namespace hora::kernels
