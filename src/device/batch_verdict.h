// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// What every rank gave a GPU batch's staged collective, agreed after it,
// and whether every rank can make an NCCL batch's calls, agreed before
// them.
//
// Staged: a rank whose device fails before the collective (no memory, a
// copy refused or timed out) still takes part, since the others are in it:
// it gives identity values (placeholders), and its own handles fail with its
// device's error. The others' results then lack its data: the verdict tells
// them which ranks failed, and their handles fail too, naming them, where
// they would otherwise have completed with wrong results. (The device
// windows say the same in their steps: collectives/allreduce_device_window.h.)
//  - A staged allreduce or broadcast carries it in its last chunk
//    (staged_chunks.h): a trailer of one flag per rank, in the batch's
//    dtype, that the batch's own reduction combines (TrailerBytes); no
//    extra round trip.
//  - Otherwise (the whole staged collectives, and reductions that would
//    lose a flag: scaled ones, integer averages) AgreeOnBatch's own
//    allreduce of one byte per rank, once the collective ran, whatever it
//    returned. A joined rank takes part too.
//
// NCCL: before its calls, every rank says (AgreeOnBatch, before_call)
// whether it can make them: its copies and prescale queued without error
// (a fault of the GPU's after that is not seen here), its buffers there, its
// communicator whole. Where one cannot, no rank makes them (so that no
// rank waits in NCCL for a call that never comes, and every rank's
// sequence of NCCL calls stays the same), and every rank's handles fail
// naming it. A rank whose communicator was aborted (an error of NCCL's)
// says so, and every rank then aborts its own: their next NCCL batch makes
// a new one together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "engine/messages.h"
#include "hora/status.h"

namespace hora {

// What a rank gave the collective, or can give the NCCL calls.
enum class BatchPart : uint8_t {
  kWhole = 0,         // its data (or a joined rank's placeholders, as meant)
  kPlaceholders = 1,  // staged: identity values, its device having failed before
  kCannot = 2,        // NCCL: it cannot make the calls (its device failed)
  kLeftNccl = 3,      // NCCL: its communicator was aborted
};

struct BatchVerdict {
  Status ran;    // the telling's own failure (the transport's)
  Status named;  // OK, or an error naming the ranks that failed
  // Some rank's NCCL communicator was aborted: every rank aborts its own.
  bool left_nccl = false;
  // The first of the two.
  Status status() const { return ran.ok() ? named : ran; }
};

// The verdict from what each rank gave (`parts`, one per rank), as rank
// `rank` sees it. Its own failure is left to its own error. After a
// staged collective, a rank whose data its results do not hold (a
// broadcast's hold only the root's) does not fail it either; before NCCL's
// calls (`before_call`), every rank's failure fails every rank, since none
// makes them.
BatchVerdict Judge(const RequestMeta& m, int rank, std::span<const BatchPart> parts,
                   bool before_call);

// One allreduce over `data` (rank r's byte is r's alone: the largest
// wins). `scratch`: the caller's, reused.
BatchVerdict AgreeOnBatch(CollectiveBackend& data, const RequestMeta& m, int rank, int size,
                          BatchPart mine, std::vector<uint8_t>& scratch, bool before_call = false);

// The bytes a staged allreduce or broadcast of `m` adds to its last chunk
// to carry the verdict among `size` ranks, or 0 where it cannot (then
// AgreeOnBatch). A broadcast: the root's flag (1 byte). An allreduce: one
// element of the dtype per rank, each rank's own slot its flag, the others'
// the reduction's neutral value, so that the reduction leaves each slot
// as its rank wrote it (as zero or not): sum, min, max and product
// unscaled, and average of floating types.
size_t TrailerBytes(const RequestMeta& m, int size);
// Writes this rank's trailer at `at` (TrailerBytes of room); `mine` is
// kWhole or kPlaceholders.
void PutTrailer(const RequestMeta& m, int rank, int size, BatchPart mine, std::byte* at);
// The verdict from the trailer at `at`, after the collective.
BatchVerdict ReadTrailer(const RequestMeta& m, int rank, int size, const std::byte* at);

}  // namespace hora
