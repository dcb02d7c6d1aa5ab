// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The transport of a job spread over several hosts: shared memory between
// ranks on the same host, TCP between hosts, chosen per pair of ranks. It
// routes each request by its peer. While a rank waits on a TCP request it
// keeps its shared-memory traffic moving (shared memory progresses only in
// the waiting thread), so a ring that sends over one and receives over the
// other never stalls.
#pragma once

#include <memory>
#include <vector>

#include "transport/transport.h"

namespace hora {

// `local_ranks` lists, in order, the global ranks on this host; `shm` was
// created among them (its rank i is local_ranks[i]). `tcp` spans every rank.
std::unique_ptr<Transport> CreateHybridTransport(int rank, int size, std::vector<int> local_ranks,
                                                 std::unique_ptr<Transport> shm,
                                                 std::unique_ptr<Transport> tcp);

}  // namespace hora
