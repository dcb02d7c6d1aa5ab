// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Dissemination barrier (Hensgen, Finkel & Manber): in round k each rank
// signals rank r+2^k and waits for rank r-2^k. After ceil(log2 n) rounds every
// rank has heard, directly or transitively, from every other.
#include "collectives/algorithms.h"

namespace hora {

Status BarrierDissemination(Comm& comm) {
  CollectiveScope scope(comm, "barrier", "dissemination");
  const int n = comm.size();
  const int r = comm.rank();
  uint32_t round = 0;
  for (int dist = 1; dist < n; dist <<= 1, ++round) {
    Request rq = comm.Irecv((r - dist + n) % n, Comm::LocalTag(0, round, 0), nullptr, 0);
    Request sq = comm.Isend((r + dist) % n, Comm::LocalTag(0, round, 0), nullptr, 0);
    HORA_RETURN_IF_ERROR(comm.Wait(rq));
    HORA_RETURN_IF_ERROR(comm.Wait(sq));
  }
  return Status::Ok();
}

}  // namespace hora
