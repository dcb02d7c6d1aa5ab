// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/allreduce_common.h"

#include <cstring>

#include "kernels/reduce.h"

namespace hora {

void AllreducePrologue(const AllreduceArgs& args) {
  const size_t bytes = args.count * DataTypeSize(args.dtype);
  if (bytes == 0) return;
  if (args.reduction.prescale_factor != 1.0 || args.dtype == DataType::kBool) {
    // bool goes through Scale(1.0) so that a lone rank's result is 0/1 too.
    kernels::Scale(args.dtype, args.reduction.prescale_factor, args.out, args.in, args.count);
  } else if (args.in != args.out) {
    std::memcpy(args.out, args.in, bytes);
  }
}

void AllreduceFinalize(const AllreduceArgs& args, int world_size, size_t offset, size_t count) {
  if (count == 0) return;
  if (!kernels::NeedsFinalize(args.dtype, args.reduction.op, world_size,
                              args.reduction.postscale_factor)) {
    return;
  }
  auto* base = static_cast<std::byte*>(args.out) + offset * DataTypeSize(args.dtype);
  kernels::Finalize(args.dtype, args.reduction.op, world_size, args.reduction.postscale_factor,
                    base, count);
}

ReduceOp ReducingOp(ReduceOp op) { return op == ReduceOp::kAverage ? ReduceOp::kSum : op; }

PowerOfTwoFold::PowerOfTwoFold(int n, int rank) {
  p = 1;
  while (p * 2 <= n) p *= 2;
  extra = n - p;
  if (rank < 2 * extra) {
    fold_partner = (rank % 2 == 0) ? rank + 1 : rank - 1;
    vrank = (rank % 2 == 0) ? -1 : rank / 2;
  } else {
    fold_partner = -1;
    vrank = rank - extra;
  }
}

}  // namespace hora
