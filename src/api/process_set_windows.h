// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A process set's shared windows (transport/shared_window.h, GroupWindows),
// made by its members together when the set is added, so that its engine's
// collectives and negotiation run on shared memory as the global set's do.
// Each member prepares its side, the members exchange their tokens over
// the set's own messages (`view`, tag context `context`, before the set's
// Comms use it), open the others' sides, agree that all did, and seal.
// Where the transport has no windows nobody exchanges anything; where a
// member cannot make or open its side (no room under /dev/shm), it says so
// in the exchange and the set goes without windows on every member (the
// point-to-point algorithms), with a warning that names the cause.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "common/logging.h"
#include "common/wait_policy.h"
#include "hora/status.h"
#include "transport/transport.h"

namespace hora {

// `transport`: the job's; `view`: the set's members as a group of their
// own (`ranks`, the job's ranks, sorted). Null where the set has no
// windows; an error where the exchange itself failed (a member lost, or
// late past the timeout), which may happen on some members only: the set
// cannot be used then (the caller fails to add it).
Result<std::unique_ptr<GroupWindows>> OpenProcessSetWindows(Transport& transport, Transport& view,
                                                            std::span<const int> ranks,
                                                            uint64_t key, uint32_t context,
                                                            const WaitPolicy& waits,
                                                            const Logger* logger);

}  // namespace hora
