// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Binomial-tree broadcast: ranks numbered relative to the root; in round k
// every rank that already has the data sends it to the rank 2^k further on.
// ceil(log2 n) rounds, each moving the whole message: for small messages.
#include "collectives/algorithms.h"

namespace hora {

Status BroadcastBinomial(Comm& comm, void* data, size_t bytes, int root) {
  CollectiveScope scope(comm, "broadcast", "binomial");
  const int n = comm.size();
  HORA_RETURN_IF_ERROR(CheckBroadcastRoot(comm, root));
  const int vrank = (comm.rank() - root + n) % n;
  auto real = [&](int v) { return (v + root) % n; };

  int mask = 1;
  while (mask < n) {
    if (vrank & mask) {  // receive once from the parent, then stop climbing
      Request r = comm.Irecv(real(vrank - mask), Comm::LocalTag(0, 0, 0), data, bytes);
      HORA_RETURN_IF_ERROR(comm.Wait(r));
      break;
    }
    mask <<= 1;
  }
  mask >>= 1;
  std::vector<Request> sends;
  for (; mask > 0; mask >>= 1) {
    if (vrank + mask < n) {
      sends.push_back(comm.Isend(real(vrank + mask), Comm::LocalTag(0, 0, 0), data, bytes));
    }
  }
  for (const Request& s : sends) HORA_RETURN_IF_ERROR(comm.Wait(s));
  return Status::Ok();
}

}  // namespace hora
