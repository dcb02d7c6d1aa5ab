// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The engine's control messages, over its own Comm (a tag context apart
// from the data): the bitwise-AND allreduce of the fast path, and the
// gather to the coordinator and broadcast from it of the slow path.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "collectives/comm.h"

namespace hora {

// words[i] = AND over ranks of words[i]: on the Comm's shared window where it
// has one (one step), else recursive doubling (any world size).
Status AllreduceAnd(Comm& comm, std::span<uint64_t> words);

// Every rank's `mine` arrives at `root`, in rank order (others get nothing).
Result<std::vector<std::vector<uint8_t>>> GatherBytes(Comm& comm, int root,
                                                      const std::vector<uint8_t>& mine);

// root's `data` replaces `data` on every rank.
Status BroadcastBytes(Comm& comm, int root, std::vector<uint8_t>& data);

}  // namespace hora
