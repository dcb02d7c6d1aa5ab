// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/pair_in_place.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace hora {

bool PairInPlace(Comm& comm, size_t send, size_t recv) {
  if (comm.size() != 2 || std::min(send, recv) < kPairInPlaceBytes) return false;
  Transport& t = comm.transport();
  return t.ReadsOnRequest(0, 1) && t.ReadsOnRequest(1, 0);
}

Status ExchangePairInPlace(Comm& comm, const void* send, size_t send_bytes, void* recv,
                           size_t recv_bytes, void* own_to, const void* own_from,
                           size_t own_bytes) {
  // Segments, not one message a block: a block read whole was slower
  // (alltoall of 16 MiB: 2,085 us against 1,747-1,947).
  const size_t seg = std::max<size_t>(1, comm.segment_bytes());
  const int peer = 1 - comm.rank();
  std::vector<Request> reqs;
  reqs.reserve((recv_bytes + seg - 1) / seg + (send_bytes + seg - 1) / seg);
  for (size_t k = 0; k * seg < recv_bytes; ++k) {
    reqs.push_back(comm.Irecv(peer, Comm::LocalTag(0, 0, static_cast<uint32_t>(k)),
                              static_cast<std::byte*>(recv) + k * seg,
                              std::min(seg, recv_bytes - k * seg)));
  }
  for (size_t k = 0; k * seg < send_bytes; ++k) {
    reqs.push_back(comm.IsendInPlace(peer, Comm::LocalTag(0, 0, static_cast<uint32_t>(k)),
                                     static_cast<const std::byte*>(send) + k * seg,
                                     std::min(seg, send_bytes - k * seg)));
  }
  if (own_bytes > 0 && own_to != own_from) std::memmove(own_to, own_from, own_bytes);
  // (A failure leaves the rest to the scope, which cancels them.)
  for (const Request& q : reqs) HORA_RETURN_IF_ERROR(comm.Wait(q));
  return Status::Ok();
}

}  // namespace hora
