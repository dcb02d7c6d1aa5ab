// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// An allgather that posts every block's transfers at once, for transports
// whose receivers read each block in place from its owner's memory (shared
// memory's single copy, Transport::ReadsInPlace): a send then costs its
// rank nothing, and no block waits for a neighbour to pass it on, as the
// ring's segments did (each waited for its reader). Used by allgather and
// the scatter-allgather broadcast where every block is so read.
#pragma once

#include <span>

#include "collectives/comm.h"

namespace hora {

// Whether every rank's block of `bytes[rank]` bytes (none: nothing to
// read) is read in place by every other rank. It asks about every pair, so
// every rank of the group answers alike (Transport::ReadsInPlace), as the
// callers need: ranks that took the ring and ranks that took this would
// not match. False below three ranks (one exchange: the ring's).
bool BlocksReadInPlace(Transport& transport, std::span<const size_t> bytes);

// In-place allgather of blocks laid out as RingAllgatherInPlace's (block
// b: bytes[b] bytes at sum(bytes[0..b)), from rank b), every transfer
// posted at once; rank `skip` (a broadcast's root, which has them all)
// receives nothing, or -1. Inside the caller's CollectiveScope; `phase`
// keeps its tags apart from the collective's other phases.
Status AllgatherBlocksAtOnce(Comm& comm, void* data, std::span<const size_t> bytes, uint32_t phase,
                             int skip = -1);

}  // namespace hora
