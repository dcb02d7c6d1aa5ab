// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The ways a batch of GPU tensors goes through the GPU (docs/dev/gpu.md),
// one row each, in the order they are tried: the first that fits the batch
// and does not decline takes it, after the one HORA_GPU_ROUTE names for its
// size, if any (gpu_routing.h). A route is its file (a DeviceStaging
// method) and its row here.
#include <string>

#include "device/device_staging.h"
#include "device/staged_chunks.h"

namespace hora {

std::span<const DeviceStaging::RouteRow> DeviceStaging::Routes() {
  static constexpr RouteRow kRows[] = {
      {"one_rank",
       "a one-rank set's allreduce or broadcast, on its GPU alone (device_staging_one_rank.cc)",
       // (Unless HORA_GPU_BACKEND=nccl sends it to NCCL.)
       [](DeviceStaging& s, const RouteAsk& a) {
         return RunsOnOneRank(a.batch, a.size, a.joined_any) &&
                !(s.routing_.nccl == NcclMode::kNccl && s.nccl_.Wants(a.m, a.bytes, a.joined_any));
       },
       [](DeviceStaging& s, const RouteAsk& a, bool*) { return s.RunOnOneRank(a.batch, a.rank); }},
      {"nccl", "through NCCL, by HORA_GPU_BACKEND and HORA_NCCL_MIN_BYTES (device_staging_nccl.cc)",
       // (Named by HORA_GPU_ROUTE: whatever HORA_NCCL_MIN_BYTES.)
       [](DeviceStaging& s, const RouteAsk& a) {
         return s.nccl_.Wants(a.m, a.named ? SIZE_MAX : a.bytes, a.joined_any);
       },
       [](DeviceStaging& s, const RouteAsk& a, bool* declined) -> Status {
         const Result<bool> ready = s.nccl_.Ready(a.data, a.rank, a.size);
         if (!ready.ok()) {
           // Its communicator aborted: this rank says so where the others
           // check before their calls (RunOnNccl), and none makes them.
           // (NCCL unusable under HORA_GPU_BACKEND=nccl fails every rank
           // alike: nothing to say.)
           if (s.nccl_.broken()) {
             (void)s.ShareVerdict(a.data, a.m, a.rank, a.size, BatchPart::kLeftNccl, true);
           }
           return ready.status();
         }
         if (!*ready) {  // (auto, and NCCL cannot be used)
           *declined = true;
           return Status::Ok();
         }
         const bool shaped = a.m.op != OpType::kAllreduce && a.m.op != OpType::kBroadcast;
         return shaped ? s.RunShapedOnNccl(a.data, *a.batch.front(), a.rank, a.size)
                       : s.RunOnNccl(a.data, a.batch, a.rank, a.size);
       }},
      {"window",
       "an allreduce on the device windows of one host, or of each host and across "
       "(device_staging_window.cc)",
       [](DeviceStaging&, const RouteAsk& a) {
         // (A joined rank's placeholders are host memory.)
         return a.m.op == OpType::kAllreduce && a.m.reduction.op != ReduceOp::kAdasum &&
                !a.joined_any && a.size > 1;
       },
       [](DeviceStaging& s, const RouteAsk& a, bool* declined) {
         bool ran = false;
         Status st = s.RunOnWindow(a.data, a.batch, a.rank, &ran);
         *declined = !ran;
         return st;
       }},
      {"staged_chunks",
       "allreduce and broadcast staged through pinned memory in chunks, pipelined "
       "(device_staging.cc)",
       [](DeviceStaging&, const RouteAsk& a) { return RunsInChunks(a.m); },
       [](DeviceStaging& s, const RouteAsk& a, bool*) {
         return s.RunPipelined(a.data, a.batch, a.rank, a.size);
       }},
      {"staged", "staged through pinned memory whole (device_staging_whole.cc)",
       [](DeviceStaging&, const RouteAsk&) { return true; },
       [](DeviceStaging& s, const RouteAsk& a, bool*) { return s.RunStagedWhole(a); }},
  };
  return kRows;
}

std::string DeviceStaging::RouteNames() {
  std::string names;
  for (const RouteRow& row : Routes()) names += (names.empty() ? "" : ", ") + std::string(row.name);
  return names;
}

const DeviceStaging::RouteRow* DeviceStaging::FindRoute(std::string_view name) {
  for (const RouteRow& row : Routes()) {
    if (name == row.name) return &row;
  }
  return nullptr;
}

}  // namespace hora
