// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// When an idle engine's thread looks again (Engine::Loop). An engine with
// nothing to do still joins the other ranks' cycles every cycle time, so
// that none waits on it for long. Each look that turns out not needed -- no
// rank waited for it, or a waiter on this rank kept it in step meanwhile --
// doubles the time to the next (up to 16 cycle times): a look wakes the
// thread, and on cores the ranks share, the wake-ups cost the ranks' cycles
// more than the looks gain. Tensors of its own, or a rank waiting for it,
// bring it back to one cycle time. Where the control plane cannot tell who
// waits (the AND goes point to point, as over TCP), an idle engine joins a
// cycle at every look, and the cycle's outcome sets the next: a cycle in
// which no rank had tensors doubles the time to the next look, one in which
// some rank had them brings it back to one cycle time. Every rank sees the
// same outcome, so their looks back off in step: idle ranks across hosts
// meet every 16 cycle times instead of every one, and a rank whose tensors
// wait for one that never submits them still has it join every cycle time
// (the stall reports need its cycles). An idle engine's cycle cost the
// ranks' own small collectives over TCP their tail: 1-2% of 4-byte
// allreduces at np 2 took 10-30x the median, one each cycle time
// (docs/dev/performance.md, session 58).
//
// Not thread-safe: the engine's thread's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

#include "common/clock.h"

namespace hora {

class IdleBackoff {
 public:
  explicit IdleBackoff(Duration cycle_time)
      : cycle_time_(cycle_time), every_(cycle_time), max_(cycle_time * 16) {}

  Duration every() const { return every_; }
  // Since when the engine is idle: the last cycle's end (`last_cycle_end`,
  // whoever ran it) or its last look that joined no cycle.
  TimePoint IdleSince(TimePoint last_cycle_end) const { return std::max(looked_, last_cycle_end); }
  TimePoint NextLook(TimePoint last_cycle_end) const { return IdleSince(last_cycle_end) + every_; }

  // The rank has tensors of its own: look every cycle time.
  void Busy() { every_ = cycle_time_; }
  // The last look was not needed: the next comes twice as late.
  void Backoff() { every_ = std::min(every_ * 2, max_); }

  // The cycle an idle look joined where nobody could tell who waits
  // (JoinDue with nullopt) ended; `idle_everywhere`: no rank had tensors.
  void Joined(bool idle_everywhere) {
    if (idle_everywhere) {
      Backoff();
    } else {
      Busy();
    }
  }

  // A look at `now`, idle: whether to join a cycle. `peer_waiting`: whether
  // some rank waits for this one (nullopt where the control plane cannot
  // tell: always join). A rank that came since the last look is let wait
  // one look more: its tensors are often this rank's next ones, which a
  // cycle now would miss (the others would cycle again for them).
  // `last_cycle_end`, in Clock ticks, tells whether a cycle ran between.
  bool JoinDue(TimePoint now, std::optional<bool> peer_waiting, int64_t last_cycle_end) {
    if (!peer_waiting) return true;
    if (*peer_waiting && seen_ == last_cycle_end) return true;  // it waited a look, no cycle since
    seen_ = *peer_waiting ? last_cycle_end : -1;
    looked_ = now;
    if (*peer_waiting) {
      Busy();
    } else {
      Backoff();
    }
    return false;
  }

 private:
  Duration cycle_time_;
  Duration every_;
  Duration max_;
  TimePoint looked_{};  // the last look that joined no cycle
  int64_t seen_ = -1;   // a rank waited at the last look, at this last cycle end (-1: none)
};

}  // namespace hora
