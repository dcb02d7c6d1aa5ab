// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "hora/types.h"

#include <cassert>

namespace hora {
namespace {

struct TypeInfo {
  DataType type;
  size_t size;
  const char* name;
  const char* short_name;
};

constexpr TypeInfo kTypes[] = {
    {DataType::kUInt8, 1, "uint8", "u8"},         {DataType::kInt8, 1, "int8", "i8"},
    {DataType::kInt16, 2, "int16", "i16"},        {DataType::kInt32, 4, "int32", "i32"},
    {DataType::kInt64, 8, "int64", "i64"},        {DataType::kFloat16, 2, "float16", "f16"},
    {DataType::kBFloat16, 2, "bfloat16", "bf16"}, {DataType::kFloat32, 4, "float32", "f32"},
    {DataType::kFloat64, 8, "float64", "f64"},    {DataType::kBool, 1, "bool", "bool"},
};

const TypeInfo& Info(DataType t) {
  const auto i = static_cast<size_t>(t);
  assert(i < std::size(kTypes));
  return kTypes[i];
}

constexpr const char* kOpNames[] = {"sum", "average", "min", "max", "product", "adasum"};

}  // namespace

size_t DataTypeSize(DataType t) { return Info(t).size; }
const char* DataTypeName(DataType t) { return Info(t).name; }

std::optional<DataType> ParseDataType(std::string_view name) {
  for (const auto& info : kTypes) {
    if (name == info.name || name == info.short_name) return info.type;
  }
  return std::nullopt;
}

bool IsFloatingPoint(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat32 ||
         t == DataType::kFloat64;
}

bool IsInteger(DataType t) { return !IsFloatingPoint(t) && t != DataType::kBool; }

const char* ReduceOpName(ReduceOp op) {
  const auto i = static_cast<size_t>(op);
  assert(i < std::size(kOpNames));
  return kOpNames[i];
}

std::optional<ReduceOp> ParseReduceOp(std::string_view name) {
  for (ReduceOp op : kAllReduceOps) {
    if (name == ReduceOpName(op)) return op;
  }
  if (name == "avg" || name == "mean") return ReduceOp::kAverage;
  if (name == "prod") return ReduceOp::kProduct;
  if (name == "adasum") return ReduceOp::kAdasum;
  return std::nullopt;
}

}  // namespace hora
