// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "backends/nccl/nccl.h"

namespace hora {

bool NcclTakes(DataType dtype, ReduceOp op) {
  if (dtype == DataType::kInt16 || dtype == DataType::kBool) return false;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kProduct:
      return true;
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return dtype != DataType::kFloat16 && dtype != DataType::kBFloat16 &&
             dtype != DataType::kFloat32 && dtype != DataType::kFloat64;
    default:
      return false;
  }
}

}  // namespace hora
