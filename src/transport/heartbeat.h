// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The rhythm of a transport's liveness (docs/dev/design.md §6), the same in every
// transport that has one (shm, TCP): a thread of the transport's own beats
// and looks at its peers every BeatInterval; a peer silent for the peer
// timeout is lost.
//
// A round of that thread that comes far later than it should proves nothing
// about the peers: this process was not running (stopped, or the whole job
// was: a scheduler's suspend, a paused VM, a host that swapped), and the
// peers were likely stopped with it. Such a round is taken as a fresh
// start: every peer's silence counts from it, so that a job paused and
// resumed as a whole goes on.
#pragma once

#include <algorithm>
#include <chrono>

#include "common/clock.h"

namespace hora {

// A fifth of the peer timeout, within [10 ms, 1 s]; 1 s without one (the
// beats then serve only peers that watch, and a process-gone check).
inline Duration BeatInterval(Duration peer_timeout) {
  if (peer_timeout <= Duration::zero()) return std::chrono::seconds(1);
  return std::clamp<Duration>(peer_timeout / 5, std::chrono::milliseconds(10),
                              std::chrono::seconds(1));
}

// Whether the round at `now`, the one after `last`, came so late that this
// process cannot have been running meanwhile (see above).
inline bool RoundCameLate(TimePoint last, TimePoint now, Duration every) {
  return now - last > every + std::max<Duration>(every, std::chrono::milliseconds(200));
}

}  // namespace hora
