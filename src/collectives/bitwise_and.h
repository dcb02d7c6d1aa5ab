// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The bitwise AND over ranks of a vector of words (the engine's bit vector,
// reached through backends/control_plane.h): one step of the Comm's shared
// window where it has one -- a step that can carry an allreduce's data in
// another Comm's window along with the words -- else recursive doubling.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "collectives/algorithms.h"
#include "collectives/comm.h"

namespace hora {

// words[i] = AND over ranks of words[i]: on the Comm's shared window where it
// has one (one step), else recursive doubling (any world size).
Status AllreduceBitwiseAnd(Comm& comm, std::span<uint64_t> words);

// Whether AllreduceBitwiseAnd (and ...Carrying) of `words` words runs on the
// Comm's shared window: it has a usable one, and `words` fit half of it.
bool BitwiseAndOnWindow(const Comm& comm, size_t words);

// Bytes of data AllreduceBitwiseAndCarrying can carry in `data`'s window
// along with `words` words on `control`'s: 0 where either has no shared
// window.
size_t CarriableBytes(const Comm& control, const Comm& data, size_t words);

// AllreduceBitwiseAnd on `control`, with `carried`'s data (null: none) sent
// in the same step where both Comms have a shared window and the data fits
// (CarriableBytes; otherwise it is not sent): each rank writes it to the half
// of `data`'s window that its next step would use, while the others may
// still be on their way. If every rank carried the same allreduce (dtype,
// size, reduction) and every rank's words but the last (a status word) are
// equal, runs that allreduce to its end on `data` and returns true: it saves
// the step of a separate allreduce. Otherwise returns false, `data` is as it
// was, and nothing is written to the parts' outputs. `words` holds the AND
// either way.
Result<bool> AllreduceBitwiseAndCarrying(Comm& control, std::span<uint64_t> words, Comm* data,
                                         const CarriedAllreduce* carried);

}  // namespace hora
