// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// What every rank gave a GPU batch's staged or NCCL collective, agreed
// after it. A rank whose device fails before the collective (no memory,
// a copy refused or timed out) still takes part, since the others are in
// it: it gives identity values (stand-ins), or, through NCCL, may have to
// leave the communicator. Its own handles fail with its device's error.
// The others' results then lack its data: the verdict tells them which
// ranks failed, and their handles fail too, naming them, where they would
// otherwise have completed with wrong results. (The device windows say the
// same in their steps: collectives/allreduce_device_window.h.)
//
// Two ways, the same on every rank for the same batch:
//  - a staged allreduce or broadcast carries it in its last chunk
//    (staged_chunks.h): a trailer of one flag per rank, in the batch's
//    dtype, that the batch's own reduction combines (TrailerBytes); no
//    extra round trip;
//  - otherwise (NCCL's batches, the whole staged ones, and reductions that
//    would lose a flag: scaled ones, integer averages) AgreeOnBatch's own
//    allreduce of one byte per rank, once the collective ran, whatever it
//    returned.
// Every rank of the batch takes part, the ranks with no GPU tensor in it
// (joined ones) too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "engine/messages.h"
#include "hora/status.h"

namespace hora {

// What a rank gave the collective.
enum class BatchPart : uint8_t {
  kWhole = 0,     // its data (or a joined rank's stand-ins, as meant)
  kStandIns = 1,  // identity values: its device failed before
  kLeftNccl = 2,  // nothing: it left (aborted) the NCCL communicator
  kRefused = 3,   // nothing: NCCL refused its call (if every rank's was,
                  // nothing is queued anywhere and NCCL is kept)
};

struct BatchVerdict {
  Status ran;    // the telling's own failure (the transport's)
  Status named;  // OK, or an error naming the ranks that failed
  // Some rank left NCCL, or some but not all had their call refused: NCCL's
  // sequence is broken, and every rank leaves it.
  bool left_nccl = false;
  // The first of the two.
  Status status() const { return ran.ok() ? named : ran; }
};

// The verdict from what each rank gave (`parts`, one per rank), as rank
// `rank` sees it: where its results do not hold a rank's data (a
// broadcast's hold only the root's), that rank's failure does not fail it,
// nor does its own (its own error says it).
BatchVerdict Judge(const RequestMeta& m, int rank, std::span<const BatchPart> parts);

// One allreduce over `data` (rank r's byte is r's alone: the largest
// wins). `scratch`: the caller's, reused.
BatchVerdict AgreeOnBatch(CollectiveBackend& data, const RequestMeta& m, int rank, int size,
                          BatchPart mine, std::vector<uint8_t>& scratch);

// The bytes a staged allreduce or broadcast of `m` adds to its last chunk
// to carry the verdict among `size` ranks, or 0 where it cannot (then
// AgreeOnBatch). A broadcast: the root's flag (1 byte). An allreduce: one
// element of the dtype per rank, each rank's own slot its flag, the others'
// the reduction's neutral value, so that the reduction leaves each slot
// as its rank wrote it (as zero or not): sum, min, max and product
// unscaled, and average of floating types.
size_t TrailerBytes(const RequestMeta& m, int size);
// Writes this rank's trailer at `at` (TrailerBytes of room); `mine` is
// kWhole or kStandIns.
void PutTrailer(const RequestMeta& m, int rank, int size, BatchPart mine, std::byte* at);
// The verdict from the trailer at `at`, after the collective.
BatchVerdict ReadTrailer(const RequestMeta& m, int rank, int size, const std::byte* at);

}  // namespace hora
