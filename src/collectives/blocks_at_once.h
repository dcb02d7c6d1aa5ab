// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// An allgather that posts every block's transfers at once, for transports
// whose receivers read each block in place from its owner's memory (shared
// memory's single copy, Transport::ReadsInPlace): a send then costs its
// rank nothing, and no block waits for a neighbour to pass it on, as the
// ring's segments did (each waited for its reader). Used by allgather and
// the scatter-allgather broadcast where every block is so read, or
// wherever HORA_BLOCKS_AT_ONCE says so (Comm::blocks_at_once).
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

// Whether an allgather of these blocks (bytes[rank], alike on every rank)
// posts them at once on `comm`: never below three ranks; otherwise as its
// HORA_BLOCKS_AT_ONCE says, and where that is auto, where every block is
// read in place. Every rank answers alike.
bool AllgatherAtOnce(Comm& comm, std::span<const size_t> bytes);

// Whether this rank of an alltoall posts its exchanges at once: never below
// three ranks; otherwise as HORA_BLOCKS_AT_ONCE says, and where that is
// auto, where every peer reads the block this rank sends it
// (`send_bytes[peer]`) in place. Ranks may answer differently (each
// exchange's tags are its step's either way).
bool AlltoallAtOnce(Comm& comm, std::span<const size_t> send_bytes);

// In-place allgather of blocks laid out as RingAllgatherInPlace's (block
// b: bytes[b] bytes at sum(bytes[0..b)), from rank b), every transfer
// posted at once; rank `skip` (a broadcast's root, which has them all)
// receives nothing, or -1. Inside the caller's CollectiveScope; `phase`
// keeps its tags apart from the collective's other phases. `own`: where
// this rank's block is, when not yet at its place in `data` (null: it is
// there): its sends read it there, and it is copied into place once they
// are posted, so that its readers need not wait for that copy.
Status AllgatherBlocksAtOnce(Comm& comm, void* data, std::span<const size_t> bytes, uint32_t phase,
                             int skip = -1, const void* own = nullptr);

}  // namespace hora
