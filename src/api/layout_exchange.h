// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Every rank's place on its host, gathered once the job is up, so that the
// cross ranks and whether hosts are even come out as Horovod's, whatever
// the launcher gave (launch/rank_layout.h, CompleteLayout).
#pragma once

#include "backends/backend.h"
#include "hora/status.h"
#include "launch/rank_layout.h"

namespace hora {

// Collective over `backend` (the job's, of `size` ranks, this one `rank`):
// every rank's local rank and size, then `layout` completed from them (its
// rank and size set to the backend's, which a launcher's variables Hora
// does not read may leave at 0 of 1).
Status ExchangeLayout(CollectiveBackend& backend, int rank, int size, RankLayout* layout);

}  // namespace hora
