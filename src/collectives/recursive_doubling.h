// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The exchange pattern of recursive doubling, apart from what is combined:
// in round k every rank swaps its whole buffer with the rank whose (virtual)
// number differs in bit k and combines the two, so log2(p) rounds suffice.
// With n not a power of two, the first 2(n-p) ranks fold in pairs first (the
// even one hands its buffer to the odd one and receives the result at the
// end). Used by the allreduce of that name and by the engine's bit-vector AND.
#pragma once

#include <cstddef>

#include "collectives/allreduce_common.h"
#include "collectives/comm.h"

namespace hora {

// `data` (`bytes` bytes) becomes the combination over all ranks: combine(tmp)
// folds `tmp` (a peer's buffer) into `data`; finish() runs once on the
// combined buffer of each rank that took part in the rounds, before it goes
// back to a folded partner. `tmp` holds `bytes` bytes. combine must be
// commutative for every rank to end with the same bytes.
template <typename Combine, typename Finish>
Status RecursiveDoubling(Comm& comm, void* data, size_t bytes, void* tmp, Combine&& combine,
                         Finish&& finish) {
  const PowerOfTwoFold fold(comm.size(), comm.rank());
  if (fold.FoldedAway()) {
    Request s = comm.Isend(fold.fold_partner, Comm::LocalTag(0, 0, 0), data, bytes);
    Request r = comm.Irecv(fold.fold_partner, Comm::LocalTag(2, 0, 0), data, bytes);
    HORA_RETURN_IF_ERROR(comm.Wait(s));
    return comm.Wait(r);
  }
  if (fold.fold_partner >= 0) {
    Request r = comm.Irecv(fold.fold_partner, Comm::LocalTag(0, 0, 0), tmp, bytes);
    HORA_RETURN_IF_ERROR(comm.Wait(r));
    combine(tmp);
  }
  uint32_t round = 0;
  for (int mask = 1; mask < fold.p; mask <<= 1, ++round) {
    const int partner = fold.Real(fold.vrank ^ mask);
    Request r = comm.Irecv(partner, Comm::LocalTag(1, round, 0), tmp, bytes);
    Request s = comm.Isend(partner, Comm::LocalTag(1, round, 0), data, bytes);
    HORA_RETURN_IF_ERROR(comm.Wait(r));
    HORA_RETURN_IF_ERROR(comm.Wait(s));
    combine(tmp);
  }
  finish();
  if (fold.fold_partner >= 0) {
    Request s = comm.Isend(fold.fold_partner, Comm::LocalTag(2, 0, 0), data, bytes);
    return comm.Wait(s);
  }
  return Status::Ok();
}

}  // namespace hora
