// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The two tiers of a job that spans hosts (docs/dev/gpu.md,
// "Across hosts"): the ranks of this host, which share memory (and so a
// GPU window), and the ranks with this rank's place on each of the other
// hosts, reached over the network. GPU allreduce reduces within a host on
// its window and exchanges across hosts only a host's share
// (collectives/allreduce_device_window.h).
//
// Found once, collectively, on the job's data Comm: every rank says whether
// its transport reaches its host's ranks by shared memory (Transport::
// ThisHost), which they are and its place among them. The tiers exist only
// where every host has the same number of ranks, two or more, and there are
// two hosts or more; every rank gets them or none does.
//
// Their Comms use the tag context no process set takes (kHostTierContext)
// and both send over the job's transport (so a rank lost anywhere fails
// their waits too); the host's Comm steps on the shared-memory transport's
// window of the job's data context, which the job's transport does not
// offer, so nothing else steps on it. The two never share a pair of ranks.
// Both name ranks as the job numbers them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collectives/comm.h"
#include "collectives/selector.h"
#include "transport/combinators/subset/subset_transport.h"

namespace hora {

// The tag context of the tiers' Comms: the last, after every process
// set's two (api/process_set_state.h checks that they stay below it).
inline constexpr uint32_t kHostTierContext = Comm::kMaxContexts - 1;
// The context of the host backend's own tiers (hierarchical allreduce of
// host tensors, HORA_HIERARCHICAL_ALLREDUCE), the one before: a second set
// of Comms over the same ranks must not share the GPU tiers' tags.
inline constexpr uint32_t kHostAllreduceTierContext = Comm::kMaxContexts - 2;
// The shared-memory transport's window the host's Comm steps on: that of
// the job's data context (process set 0's, 1).
inline constexpr uint32_t kHostTierWindow = 1;

struct HostTiers {
  Comm* host = nullptr;    // this host's ranks, with a shared window
  Comm* across = nullptr;  // the ranks with this rank's place on the other hosts
  const Selector* selector = nullptr;
  int world = 0;  // the job's ranks
};

class HostTierComms {
 public:
  // Collective on `comm` (the job's data Comm, whose ranks are its
  // transport's). Null when the job has no such tiers; `why_not` then says
  // why where that is worth a warning (hosts with different numbers of
  // ranks, a rank alone on its host).
  // Their Comms use tag context `context`; the host's steps on the shared
  // window (kHostTierWindow) only where `with_window`.
  static Result<std::unique_ptr<HostTierComms>> Find(Comm& comm, const Selector* selector,
                                                     std::string* why_not,
                                                     uint32_t context = kHostTierContext,
                                                     bool with_window = true);

  const HostTiers& tiers() const { return tiers_; }

 private:
  HostTierComms() = default;

  std::unique_ptr<SubsetTransport> host_view_;
  std::unique_ptr<Comm> host_;
  std::unique_ptr<SubsetTransport> across_view_;
  std::unique_ptr<Comm> across_;
  HostTiers tiers_;
};

}  // namespace hora
