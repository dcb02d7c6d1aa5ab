// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// One process set as a rank of the session sees it: its ranks and, on a
// member, the engine that runs its collectives. Set 0 is every rank (the
// global set). Each set's engine has comms in tag contexts of its own (data
// 2k+1, control 2k+2 for context slot k), so sets run at once over one
// transport, and a cache of its own; within a host (on a transport with
// windows), a set of two ranks or more has shared windows of its own, made
// by its members as it is added.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/control_plane.h"
#include "backends/host_tiers.h"
#include "collectives/comm.h"
#include "collectives/selector.h"
#include "common/config.h"
#include "common/logging.h"
#include "engine/engine.h"
#include "transport/combinators/subset/subset_transport.h"

namespace hora {

// "0, 2, 3": ranks as error messages list them.
std::string RankListText(std::span<const int> ranks);

struct ProcessSetState {
  // The most sets (the global one included) that can exist at once: each
  // takes two of Comm's tag contexts, and context 0 is the Session's own.
  // (The last two contexts are the host tiers', backends/host_tiers.h.)
  static constexpr int kMaxSlots = static_cast<int>((Comm::kMaxContexts - 3) / 2);
  static_assert(2 * kMaxSlots < kHostAllreduceTierContext &&
                    kHostAllreduceTierContext < kHostTierContext,
                "a process set would take a host tiers' context");

  // `ranks`: the session's ranks in the set (sorted). A member gets its
  // comms and backend; a non-member only records the set. `logger` (which
  // outlives the set) gets the reports of long waits.
  // `job_spans_hosts`: the job's ranks are on more than one host (every
  // rank of the job says the same; only the global set's backend, over the
  // job's own transport, can find host tiers).
  ProcessSetState(int id, std::vector<int> ranks, int slot, Transport& transport,
                  const Config& config, Selector selector, const Logger* logger,
                  bool job_spans_hosts = false);
  ~ProcessSetState() { engine.reset(); }  // the engine stops before its comms go

  bool member() const { return rank >= 0; }
  // The set's rank of session rank `global`, or -1 when it is not a member.
  int SetRank(int global) const;
  // "process set 2 (ranks 0, 2, 3)"; "" for the global set.
  std::string Label() const;

  const int id;
  const std::vector<int> ranks;
  const int slot;
  int rank = -1;  // this rank's place in the set (-1: not a member)
  // Why a member could not make the set with the others (the exchange of
  // its windows failed: a member lost, or late past the timeout); then it
  // has no comms, and the set must not be used.
  Status failed;

  // Members only. `view` is null for the global set (its comms use the
  // session's transport itself).
  std::unique_ptr<SubsetTransport> view;
  // A set other than the global one, where the transport has windows: its
  // own (api/process_set_windows.h); null otherwise.
  std::unique_ptr<GroupWindows> windows;
  std::unique_ptr<Comm> data_comm;
  std::unique_ptr<Comm> control_comm;
  std::unique_ptr<CollectiveBackend> backend;
  std::unique_ptr<ControlPlane> control;  // the engine's, over control_comm (with it)
  std::unique_ptr<Engine> engine;         // started with the set (under Impl::engine_mu)
  uint64_t unnamed[kOpTypeCount] = {};    // per OpType: generated names
  uint64_t unnamed_groups = 0;
};

}  // namespace hora
