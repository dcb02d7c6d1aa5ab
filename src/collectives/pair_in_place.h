// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Two ranks exchanging a block each (an allgather's or an alltoall's one
// transfer at two ranks) where each reads the other's block in place
// (Transport::ReadsOnRequest: shared memory's single copy). Both post their
// transfers first, then each copies its own block into its output (its
// peer may read the first segment meanwhile: a channel offers one direct
// message at a time), then reads the other's. Through the slots each
// rank's core copies its own block, the block it sends (in) and the block
// it receives (out); here two of those three, the kernel's read being the
// second. Posting first was what made a single copy pay here; letting the
// peer read every segment during the own copy was slower (two large copies
// at once on two cores). Taken from blocks of 1 MiB on
// (docs/dev/performance.md, session 65): below that the slots, their
// copies pipelined across two cores, were faster.
#pragma once

#include <cstddef>

#include "collectives/comm.h"

namespace hora {

// The smallest block, of either rank, that the exchange is taken for.
inline constexpr size_t kPairInPlaceBytes = size_t{1} << 20;

// Whether a two-rank exchange of `send` bytes for `recv` bytes runs as
// ExchangePairInPlace: the two read each other on request and both blocks
// are at least kPairInPlaceBytes. The peer's send is this rank's receive,
// so both ranks answer alike.
bool PairInPlace(Comm& comm, size_t send, size_t recv);

// The exchange with the peer: `send` (this rank's block for it) read in
// place, the peer's block into `recv`, both in segments of the Comm's
// segment size; meanwhile `own_bytes` from `own_from` to `own_to` (this
// rank's own block, memmove). `send` must not be written until it returns.
// Inside the caller's CollectiveScope.
Status ExchangePairInPlace(Comm& comm, const void* send, size_t send_bytes, void* recv,
                           size_t recv_bytes, void* own_to, const void* own_from, size_t own_bytes);

}  // namespace hora
