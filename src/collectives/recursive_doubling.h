// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The exchange pattern of recursive doubling, apart from what is combined:
// in round k every rank swaps its whole buffer with the rank whose (virtual)
// number differs in bit k and combines the two, so log2(p) rounds suffice.
// With n not a power of two, the first 2(n-p) ranks fold in pairs first (the
// even one hands its buffer to the odd one and receives the result at the
// end). Used by the allreduce of that name and by the engine's bit-vector
// AND; the fold alone by halving-doubling.
#pragma once

#include <cstddef>

#include "collectives/allreduce_common.h"
#include "collectives/comm.h"

namespace hora {

// The fold of a world that is not a power of two (PowerOfTwoFold), around
// an algorithm's rounds among the p ranks left. FoldIn: a rank folded away
// sends its buffer to its partner and waits for the result (its partner's
// FoldOut, tag phase `back_phase`), then returns true: it is done. Its
// partner receives that buffer into `tmp` and combine(tmp) folds it in.
template <typename Combine>
Result<bool> FoldIn(Comm& comm, const PowerOfTwoFold& fold, void* data, size_t bytes, void* tmp,
                    uint32_t back_phase, Combine&& combine) {
  if (fold.FoldedAway()) {
    Request s = comm.Isend(fold.fold_partner, Comm::LocalTag(0, 0, 0), data, bytes);
    Request r = comm.Irecv(fold.fold_partner, Comm::LocalTag(back_phase, 0, 0), data, bytes);
    HORA_RETURN_IF_ERROR(comm.Wait(s));
    HORA_RETURN_IF_ERROR(comm.Wait(r));
    return true;
  }
  if (fold.fold_partner >= 0) {
    Request r = comm.Irecv(fold.fold_partner, Comm::LocalTag(0, 0, 0), tmp, bytes);
    HORA_RETURN_IF_ERROR(comm.Wait(r));
    combine(tmp);
  }
  return false;
}

// After the rounds: the result back to a folded-away partner, if any.
inline Status FoldOut(Comm& comm, const PowerOfTwoFold& fold, const void* data, size_t bytes,
                      uint32_t back_phase) {
  if (fold.fold_partner < 0) return Status::Ok();
  Request s = comm.Isend(fold.fold_partner, Comm::LocalTag(back_phase, 0, 0), data, bytes);
  return comm.Wait(s);
}

// `data` (`bytes` bytes) becomes the combination over all ranks: combine(tmp)
// folds `tmp` (a peer's buffer) into `data`; finish() runs once on the
// combined buffer of each rank that took part in the rounds, before it goes
// back to a folded partner. `tmp` holds `bytes` bytes. combine must be
// commutative for every rank to end with the same bytes.
template <typename Combine, typename Finish>
Status RecursiveDoubling(Comm& comm, void* data, size_t bytes, void* tmp, Combine&& combine,
                         Finish&& finish) {
  const PowerOfTwoFold fold(comm.size(), comm.rank());
  HORA_ASSIGN_OR_RETURN(const bool done, FoldIn(comm, fold, data, bytes, tmp, 2, combine));
  if (done) return Status::Ok();
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
  return FoldOut(comm, fold, data, bytes, 2);
}

}  // namespace hora
