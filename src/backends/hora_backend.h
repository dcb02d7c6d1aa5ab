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

// `comm` must outlive the backend. With `hierarchical`
// (HORA_HIERARCHICAL_ALLREDUCE), allreduces run AllreduceHierarchical over
// the job's host tiers (host_tiers.h), found at the first allreduce, where
// it has them; elsewhere, and for Adasum, as without. Where the job has
// several hosts but no tiers (hosts of unequal rank counts), the first rank
// warns once through `logger` (which, if given, must outlive the backend).
std::unique_ptr<CollectiveBackend> CreateHoraBackend(Comm& comm, Selector selector,
                                                     bool hierarchical = false,
                                                     const Logger* logger = nullptr);

}  // namespace hora
