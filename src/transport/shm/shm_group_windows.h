// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The shm transport's windows of a group of its ranks (a process set;
// transport/shared_window.h, GroupWindows). Each member creates a segment
// "/hora-<job_id>-set<key>-win-<rank>-<creator>" holding its side of the
// group's data and control windows (shm_window.h, contexts 1 and 2) and
// offers its name as its token; opening maps the others' segments by their
// tokens, checking that each is the name that member's segment of this
// group must have; sealing unlinks this rank's name. The windows wait and
// wake as the transport's own (its doorbells, poll settings and liveness),
// ringing only the group's members.
#pragma once

#include <memory>
#include <span>

#include "transport/shared_window.h"

namespace hora {

class ShmTransport;

// Creates this rank's segment of group `key` of `ranks` (ShmTransport's
// PrepareGroupWindows).
Result<std::unique_ptr<PendingGroupWindows>> PrepareShmGroupWindows(ShmTransport& transport,
                                                                    std::span<const int> ranks,
                                                                    uint64_t key);

}  // namespace hora
