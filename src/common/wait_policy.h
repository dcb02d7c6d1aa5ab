// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// How a wait for another rank behaves when that rank is slow (docs/dev/design.md §6).
// A lost rank (its process ended, its connection closed, no heartbeat for
// HORA_PEER_TIMEOUT_S) fails the wait through the transport, whatever this
// says. A slow one -- alive, but not yet where this rank waits for it -- is
// waited for, and the wait is reported after `report_every` and again each
// time as long again passes (HORA_STALL_WARNING_S); it fails only once
// `timeout` has passed (HORA_TIMEOUT_S, a user's choice: by default never).
#pragma once

#include <algorithm>

#include "common/clock.h"
#include "common/config.h"
#include "common/logging.h"

namespace hora {

struct WaitPolicy {
  Duration timeout{};              // zero: a wait for a live rank never fails
  Duration report_every{};         // zero: never reported
  const Logger* logger = nullptr;  // where reports go (null: nowhere)

  // The Session's policy: HORA_TIMEOUT_S and HORA_STALL_WARNING_S.
  static WaitPolicy FromConfig(const Config& config, const Logger* logger) {
    return {SecondsToDuration(config.timeout_s), SecondsToDuration(config.stall_warning_s), logger};
  }

  // How long one slice of a wait may last: until the first report or the
  // timeout, and at most `longest` (a waiter looks up at least that often).
  Duration FirstSlice(Duration longest) const {
    Duration slice = longest;
    if (timeout > Duration::zero()) slice = std::min(slice, timeout);
    if (report_every > Duration::zero()) slice = std::min(slice, report_every);
    return slice;
  }
};

}  // namespace hora
