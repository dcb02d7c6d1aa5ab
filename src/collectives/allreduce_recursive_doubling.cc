// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Recursive doubling allreduce: in round k every rank exchanges its whole
// buffer with the rank whose (virtual) number differs in bit k and reduces,
// so log2(p) rounds suffice. Fewest rounds of all, but each moves the whole
// message: the choice for small messages. With n not a power of two, the
// first 2(n-p) ranks fold in pairs first (the even one hands its data to the
// odd one and receives the result at the end).
//
// Both partners compute op(a, b) and op(b, a); every op is commutative in
// IEEE arithmetic, so all ranks end bitwise identical.
#include "collectives/algorithms.h"
#include "collectives/allreduce_common.h"
#include "collectives/kernels/reduce.h"

namespace hora {

Status AllreduceRecursiveDoubling(Comm& comm, const AllreduceArgs& args) {
  CollectiveScope scope(comm, "allreduce", "recursive_doubling");
  const int n = comm.size();
  const size_t bytes = args.count * DataTypeSize(args.dtype);
  const ReduceOp op = ReducingOp(args.reduction.op);
  AllreducePrologue(args);
  void* tmp = comm.Scratch(0, bytes);
  const PowerOfTwoFold fold(n, comm.rank());

  if (fold.FoldedAway()) {
    Request s = comm.Isend(fold.fold_partner, Comm::LocalTag(0, 0, 0), args.out, bytes);
    Request r = comm.Irecv(fold.fold_partner, Comm::LocalTag(2, 0, 0), args.out, bytes);
    HORA_RETURN_IF_ERROR(comm.Wait(s));
    return comm.Wait(r);
  }
  if (fold.fold_partner >= 0) {
    Request r = comm.Irecv(fold.fold_partner, Comm::LocalTag(0, 0, 0), tmp, bytes);
    HORA_RETURN_IF_ERROR(comm.Wait(r));
    kernels::Reduce(args.dtype, op, args.out, tmp, args.count);
  }

  uint32_t round = 0;
  for (int mask = 1; mask < fold.p; mask <<= 1, ++round) {
    const int partner = fold.Real(fold.vrank ^ mask);
    Request r = comm.Irecv(partner, Comm::LocalTag(1, round, 0), tmp, bytes);
    Request s = comm.Isend(partner, Comm::LocalTag(1, round, 0), args.out, bytes);
    HORA_RETURN_IF_ERROR(comm.Wait(r));
    HORA_RETURN_IF_ERROR(comm.Wait(s));
    kernels::Reduce(args.dtype, op, args.out, tmp, args.count);
  }
  AllreduceFinalize(args, n, 0, args.count);

  if (fold.fold_partner >= 0) {
    Request s = comm.Isend(fold.fold_partner, Comm::LocalTag(2, 0, 0), args.out, bytes);
    return comm.Wait(s);
  }
  return Status::Ok();
}

}  // namespace hora
