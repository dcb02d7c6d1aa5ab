// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The loopback transport's windows of a group of its ranks (a process set;
// transport/shared_window.h, GroupWindows): the hub's memory, one
// LoopbackWindowGroup per context of the group (data and control), which
// every member's side holds from its preparation on, so that the first
// member to arrive makes it and the last to go frees it. Tokens carry
// nothing (the ranks share an address space) and sealing has nothing to do.
#pragma once

#include <memory>
#include <span>

#include "transport/loopback/loopback_transport.h"

namespace hora {

Result<std::unique_ptr<PendingGroupWindows>> PrepareLoopbackGroupWindows(
    std::shared_ptr<LoopbackHub> hub, int rank, int generation, std::span<const int> ranks,
    uint64_t key);

}  // namespace hora
