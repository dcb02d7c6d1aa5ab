// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Recursive doubling allreduce (recursive_doubling.h): log2(p) exchanges of
// the whole buffer, each reduced. Fewest rounds of all, but each moves the
// whole message: the choice for small messages.
//
// Both partners compute op(a, b) and op(b, a); every op is commutative in
// IEEE arithmetic, so all ranks end bitwise identical.
#include "collectives/algorithms.h"
#include "collectives/allreduce_common.h"
#include "collectives/recursive_doubling.h"
#include "kernels/reduce.h"

namespace hora {

Status AllreduceRecursiveDoubling(Comm& comm, const AllreduceArgs& args) {
  CollectiveScope scope(comm, "allreduce", "recursive_doubling");
  const size_t bytes = args.count * DataTypeSize(args.dtype);
  const ReduceOp op = ReducingOp(args.reduction.op);
  AllreducePrologue(args);
  return RecursiveDoubling(
      comm, args.out, bytes, comm.Scratch(0, bytes),
      [&](const void* tmp) { kernels::Reduce(args.dtype, op, args.out, tmp, args.count); },
      [&] { AllreduceFinalize(args, comm.size(), 0, args.count); });
}

}  // namespace hora
