// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Pairwise-exchange alltoall: in step s (1..n-1) rank r sends its block for
// rank r+s and receives the block from rank r-s, so every step is a perfect
// matching and no rank is flooded by many senders at once; or, where every
// peer reads this rank's blocks in place (or HORA_BLOCKS_AT_ONCE=1), every
// exchange at once; two ranks that read each other's large blocks in place
// exchange them so (pair_in_place.h).
#include <cstring>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/blocks_at_once.h"
#include "collectives/pair_in_place.h"

namespace hora {

Status AlltoallPairwise(Comm& comm, const void* in, std::span<const size_t> send_bytes, void* out,
                        std::span<const size_t> recv_bytes) {
  CollectiveScope scope(comm, "alltoall", "pairwise");
  const int n = comm.size();
  const int r = comm.rank();
  if (send_bytes.size() != static_cast<size_t>(n) || recv_bytes.size() != static_cast<size_t>(n)) {
    return InvalidArgument("alltoall: splits must have one entry per rank (" + std::to_string(n) +
                           ")");
  }
  std::vector<size_t> soff(static_cast<size_t>(n) + 1, 0), roff(static_cast<size_t>(n) + 1, 0);
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    soff[i + 1] = soff[i] + send_bytes[i];
    roff[i + 1] = roff[i] + recv_bytes[i];
  }
  const auto* src = static_cast<const std::byte*>(in);
  auto* dst = static_cast<std::byte*>(out);
  const auto me = static_cast<size_t>(r);
  if (send_bytes[me] != recv_bytes[me]) {
    return InvalidArgument("alltoall: rank " + std::to_string(r) + " sends itself " +
                           std::to_string(send_bytes[me]) + " bytes but expects " +
                           std::to_string(recv_bytes[me]));
  }
  if (n == 2 && PairInPlace(comm, send_bytes[1 - me], recv_bytes[1 - me])) {
    scope.SetAlgorithm("pair_in_place");
    const size_t p = 1 - me;
    return ExchangePairInPlace(comm, src + soff[p], send_bytes[p], dst + roff[p], recv_bytes[p],
                               dst + roff[me], src + soff[me], send_bytes[me]);
  }
  // Where every peer reads this rank's blocks in place (shared memory's
  // single copy), every exchange is posted at once: a send then costs this
  // rank nothing, and each peer reads its block whenever it gets to it
  // instead of in lockstep (docs/dev/performance.md, session 63). Elsewhere
  // the pairs: over TCP, sending to every rank at once was slower.
  // HORA_BLOCKS_AT_ONCE may say otherwise (AlltoallAtOnce).
  if (AlltoallAtOnce(comm, send_bytes)) {
    scope.SetAlgorithm("at_once");
    std::vector<Request> reqs;
    reqs.reserve(2 * static_cast<size_t>(n - 1));
    for (int s = 1; s < n; ++s) {
      const auto from = static_cast<size_t>((r - s + n) % n);
      reqs.push_back(comm.Irecv(static_cast<int>(from),
                                Comm::LocalTag(0, static_cast<uint32_t>(s), 0), dst + roff[from],
                                recv_bytes[from]));
    }
    for (int s = 1; s < n; ++s) {
      const auto to = static_cast<size_t>((r + s) % n);
      reqs.push_back(comm.Isend(static_cast<int>(to),
                                Comm::LocalTag(0, static_cast<uint32_t>(s), 0), src + soff[to],
                                send_bytes[to]));
    }
    // The own block once the peers may read theirs.
    if (send_bytes[me] > 0) std::memcpy(dst + roff[me], src + soff[me], send_bytes[me]);
    // (A failure leaves the rest to the scope, which cancels them.)
    for (const Request& q : reqs) HORA_RETURN_IF_ERROR(comm.Wait(q));
    return Status::Ok();
  }

  if (send_bytes[me] > 0) std::memcpy(dst + roff[me], src + soff[me], send_bytes[me]);
  for (int s = 1; s < n; ++s) {
    const auto to = static_cast<size_t>((r + s) % n);
    const auto from = static_cast<size_t>((r - s + n) % n);
    Request rq = comm.Irecv(static_cast<int>(from), Comm::LocalTag(0, static_cast<uint32_t>(s), 0),
                            dst + roff[from], recv_bytes[from]);
    Request sq = comm.Isend(static_cast<int>(to), Comm::LocalTag(0, static_cast<uint32_t>(s), 0),
                            src + soff[to], send_bytes[to]);
    HORA_RETURN_IF_ERROR(comm.Wait(rq));
    HORA_RETURN_IF_ERROR(comm.Wait(sq));
  }
  return Status::Ok();
}

}  // namespace hora
