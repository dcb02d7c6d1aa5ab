// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Reducing any value with the identity leaves it unchanged, for every dtype
// and op (checked through the real reduction kernels).
#include "kernels/reduction_identity.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/reduce.h"
#include "support/reference.h"

namespace hora {
namespace {

TEST(Identity, ReducingWithItChangesNothing) {
  const DataType types[] = {DataType::kUInt8,    DataType::kInt8,    DataType::kInt16,
                            DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
                            DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64,
                            DataType::kBool};
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct};
  constexpr size_t kCount = 37;
  for (DataType t : types) {
    for (ReduceOp op : ops) {
      const size_t bytes = kCount * DataTypeSize(t);
      std::vector<uint8_t> x(bytes), id(bytes);
      testing::FillInput(t, op, x.data(), kCount, 11, 3);
      kernels::FillIdentity(t, op, id.data(), kCount);
      std::vector<uint8_t> before = x;
      kernels::Reduce(t, op, x.data(), id.data(), kCount);
      if (t == DataType::kBool) {  // any nonzero byte is true; results are 0 or 1
        for (size_t i = 0; i < kCount; ++i)
          EXPECT_EQ(before[i] != 0, x[i] != 0) << "bool " << ReduceOpName(op) << " at " << i;
        continue;
      }
      EXPECT_EQ(std::memcmp(before.data(), x.data(), bytes), 0)
          << DataTypeName(t) << " " << ReduceOpName(op);
    }
  }
}

}  // namespace
}  // namespace hora
