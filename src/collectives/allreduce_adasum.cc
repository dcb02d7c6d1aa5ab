// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Adasum allreduce (ReduceOp::kAdasum, include/hora/types.h): in round k
// every rank exchanges its whole vector with rank ^ 2^k and both combine
// the pair (kernels/adasum.h); after log2(n) rounds every rank holds the
// binary tree of combinations over ranks 0..n-1. Both partners combine the
// same two vectors with a symmetric formula, so all ranks end bitwise
// identical. Like recursive doubling, each round moves the whole message
// (Horovod's vector-halving variant moves less for large messages and
// sums partial dot products instead).
#include "collectives/algorithms.h"
#include "collectives/allreduce_common.h"
#include "kernels/adasum.h"

namespace hora {

Status AllreduceAdasum(Comm& comm, const AllreduceArgs& args) {
  CollectiveScope scope(comm, "allreduce", "adasum");
  const int n = comm.size();
  if ((n & (n - 1)) != 0) {
    return UnimplementedError("rank " + std::to_string(comm.Number(comm.rank())) +
                              ": Adasum needs a power-of-two number of ranks, not " +
                              std::to_string(n));
  }
  if (!IsFloatingPoint(args.dtype)) {
    return InvalidArgument("rank " + std::to_string(comm.Number(comm.rank())) +
                           ": Adasum is defined for floating types, not " +
                           DataTypeName(args.dtype));
  }
  const size_t bytes = args.count * DataTypeSize(args.dtype);
  AllreducePrologue(args);
  void* theirs = comm.Scratch(0, bytes);
  uint32_t round = 0;
  for (int mask = 1; mask < n; mask <<= 1, ++round) {
    const int partner = comm.rank() ^ mask;
    Request r = comm.Irecv(partner, Comm::LocalTag(0, round, 0), theirs, bytes);
    Request s = comm.Isend(partner, Comm::LocalTag(0, round, 0), args.out, bytes);
    HORA_RETURN_IF_ERROR(comm.Wait(r));
    HORA_RETURN_IF_ERROR(comm.Wait(s));
    double ca = 1, cb = 1;
    kernels::AdasumCoefficients(
        kernels::AdasumDotProducts(args.dtype, args.out, theirs, args.count), &ca, &cb);
    kernels::AdasumCombine(args.dtype, ca, cb, args.out, theirs, args.count);
  }
  AllreduceFinalize(args, n, 0, args.count);
  return Status::Ok();
}

}  // namespace hora
