// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Recursive halving-doubling allreduce (Rabenseifner): a reduce-scatter by
// recursive halving (round k: keep half of the current range, send the other
// half to the partner across bit k, reduce what comes back), which leaves
// block v on virtual rank v; then an allgather by recursive doubling that
// retraces the rounds. 2 log2(p) rounds and 2(p-1)/p of the message sent:
// bandwidth-optimal with fewer rounds than the ring. Non-powers of two fold
// as in recursive doubling.
#include "collectives/algorithms.h"
#include "collectives/allreduce_common.h"
#include "collectives/partition.h"
#include "collectives/recursive_doubling.h"
#include "kernels/reduce.h"

namespace hora {

Status AllreduceHalvingDoubling(Comm& comm, const AllreduceArgs& args) {
  CollectiveScope scope(comm, "allreduce", "halving_doubling");
  const int n = comm.size();
  const size_t esize = DataTypeSize(args.dtype);
  const size_t bytes = args.count * esize;
  const ReduceOp op = ReducingOp(args.reduction.op);
  AllreducePrologue(args);
  auto* out = static_cast<std::byte*>(args.out);
  auto* tmp = static_cast<std::byte*>(comm.Scratch(0, bytes));
  const PowerOfTwoFold fold(n, comm.rank());

  HORA_ASSIGN_OR_RETURN(const bool done, FoldIn(comm, fold, out, bytes, tmp, 3, [&](void* in) {
                          kernels::Reduce(args.dtype, op, out, in, args.count);
                        }));
  if (done) return Status::Ok();

  const EvenPartition part{args.count, static_cast<size_t>(fold.p)};
  auto elem_off = [&](int block) { return part.offset(static_cast<size_t>(block)); };
  int lo = 0;
  int hi = fold.p;
  uint32_t round = 0;
  for (int mask = fold.p / 2; mask >= 1; mask >>= 1, ++round) {
    const int partner = fold.Real(fold.vrank ^ mask);
    const int mid = (lo + hi) / 2;
    const bool upper = (fold.vrank & mask) != 0;
    const int keep_lo = upper ? mid : lo, keep_hi = upper ? hi : mid;
    const int send_lo = upper ? lo : mid, send_hi = upper ? mid : hi;
    const size_t keep_count = elem_off(keep_hi) - elem_off(keep_lo);
    const size_t send_count = elem_off(send_hi) - elem_off(send_lo);
    Request r = comm.Irecv(partner, Comm::LocalTag(1, round, 0), tmp, keep_count * esize);
    Request s = comm.Isend(partner, Comm::LocalTag(1, round, 0), out + elem_off(send_lo) * esize,
                           send_count * esize);
    HORA_RETURN_IF_ERROR(comm.Wait(r));
    kernels::Reduce(args.dtype, op, out + elem_off(keep_lo) * esize, tmp, keep_count);
    HORA_RETURN_IF_ERROR(comm.Wait(s));
    lo = keep_lo;
    hi = keep_hi;
  }
  AllreduceFinalize(args, n, elem_off(lo), elem_off(hi) - elem_off(lo));

  round = 0;
  for (int mask = 1; mask < fold.p; mask <<= 1, ++round) {
    const int partner = fold.Real(fold.vrank ^ mask);
    const int width = hi - lo;
    const bool upper = (fold.vrank & mask) != 0;
    const int other_lo = upper ? lo - width : hi;
    const int other_hi = other_lo + width;
    Request r = comm.Irecv(partner, Comm::LocalTag(2, round, 0), out + elem_off(other_lo) * esize,
                           (elem_off(other_hi) - elem_off(other_lo)) * esize);
    Request s = comm.Isend(partner, Comm::LocalTag(2, round, 0), out + elem_off(lo) * esize,
                           (elem_off(hi) - elem_off(lo)) * esize);
    HORA_RETURN_IF_ERROR(comm.Wait(r));
    HORA_RETURN_IF_ERROR(comm.Wait(s));
    lo = upper ? other_lo : lo;
    hi = upper ? hi : other_hi;
  }
  return FoldOut(comm, fold, out, bytes, 3);
}

}  // namespace hora
