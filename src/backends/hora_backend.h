// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The default backend: Hora's algorithms (algorithms.h) over the rank's
// transport, chosen per call by the Selector (cost model or override).
#pragma once

#include <memory>

#include "backends/backend.h"
#include "collectives/comm.h"
#include "collectives/selector.h"

namespace hora {

class Logger;

// `comm` must outlive the backend. Where the job spans hosts with as many
// ranks (two or more) on each, `hierarchy` (HORA_HIERARCHICAL_ALLREDUCE)
// says whether allreduces run AllreduceHierarchical (every rank of a host
// crossing) or AllreduceHierarchicalOne (one rank a host) over its host
// tiers (host_tiers.h, found at the first allreduce): never, always the
// one or the other, or size by size the fastest of flat and the two that
// the cost model predicts (collectives/hierarchy_cost.h), which also costs
// the flat algorithms on the two links there. Elsewhere, and for Adasum, they run flat. Where
// hierarchy is on but the job's hosts have unequal rank counts, the first rank warns once through
// `logger` (which, if given, must outlive the backend). `job_spans_hosts` says whether to look for
// tiers at all: it must be the same on every rank (the job's layout, not this rank's transport: a
// rank alone on its host has TCP alone, its peers a hybrid transport), and finding them is a
// collective on `comm`.
std::unique_ptr<CollectiveBackend> CreateHoraBackend(Comm& comm, Selector selector,
                                                     Hierarchy hierarchy = Hierarchy::kOff,
                                                     bool job_spans_hosts = false,
                                                     const Logger* logger = nullptr);

}  // namespace hora
