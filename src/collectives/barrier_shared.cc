// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Barrier on a shared window: one step (every rank has arrived when it
// returns), against ceil(log2 n) message rounds of the dissemination barrier.
#include "collectives/algorithms.h"
#include "collectives/shared_common.h"

namespace hora {

Status BarrierShared(Comm& comm) {
  CollectiveScope scope(comm, "barrier", "shared_memory");
  if (comm.size() == 1) return Status::Ok();
  comm.window()->NextHalf();  // as every window collective: the halves stay in step
  return SharedFirstStep(comm, SharedCall::kBarrier, DataType::kUInt8, 0);
}

}  // namespace hora
