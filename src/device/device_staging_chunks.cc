// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The route "staged_chunks" (device_routes.cc): allreduce and broadcast
// staged through pinned memory in chunks (staged_chunks.h), pipelined: the
// backend runs each chunk as soon as its copy in is done, while later
// chunks are copied in or earlier ones back. The handles complete without
// waiting for the copies back, which end with an event the handles hold
// (device_done.h).
//
// Its cost: two ranks sharing one H200 (HORA_GPU_IPC=0), 4 B in 33 us
// p50 under CUDA MPS, and 64 MiB in 22,101 us, 3.0 GB/s
// (docs/dev/gpu_runs.md, 2026-11-26).
#include "device/device_staging.h"
#include "device/staged_chunks.h"

namespace hora {

struct StagedChunksRoute;

template <>
const DeviceStaging::RouteRow& DeviceStaging::Row<StagedChunksRoute>() {
  static constexpr RouteRow kRow = {
      "staged_chunks",
      "allreduce and broadcast staged through pinned memory in chunks, pipelined "
      "(device_staging_chunks.cc)",
      {33, 3.0},
      [](DeviceStaging&, const RouteAsk& a) { return RunsInChunks(a.m); },
      [](DeviceStaging& s, const RouteAsk& a, bool*) -> Status {
        const RequestMeta& m = a.m;
        const std::vector<TensorRecord*>& batch = a.batch;
        const size_t bytes = s.Layout(batch);
        const bool fused = batch.size() > 1;
        const bool in = m.op != OpType::kBroadcast || a.rank == m.root;
        const bool out = m.op != OpType::kBroadcast || a.rank != m.root;
        const size_t chunk = ChunkBytes(m, s.routing_.staging_chunk, bytes);
        const size_t chunks = chunk == 0 || bytes == 0 ? 1 : (bytes + chunk - 1) / chunk;
        // `staged`: the inputs' way to host memory; `back`: the results' way back.
        // Whatever fails, the collective runs on (see Run), on identity values
        // from the failed chunk on, and every rank is told with the last chunk
        // (its trailer, which the pinned buffer has room for: batch_verdict.h).
        // The others then copy the last chunk back no more, and their handles
        // fail; their earlier chunks back may be queued by then.
        const size_t trailer = TrailerBytes(m, a.size);
        Status staged = s.Prepare(bytes + trailer, fused ? bytes : 0);
        if (staged.ok()) staged = s.ChunkEvents(chunks);
        const char* step = "copying the inputs to host memory";
        bool queued = false;  // copies that read or write the tensors
        if (staged.ok()) {
          // A broadcast's receivers write the pinned buffer with no copy in
          // before: the last batch's copies out, which read it, must be done.
          if (in) {
            queued = true;
            staged = s.QueueCopiesIn(batch, bytes, chunk);
          } else {
            step = "waiting for the last batch's copies back";
            staged = s.WaitLastDone();
          }
          if (!staged.ok()) s.LetGoPinned();
        }
        Status back;
        BatchVerdict told;  // (with the last chunk)
        std::byte* area = staged.ok() ? s.pinned_ : s.IdentityScratch(batch, bytes + trailer);
        bool placeholders = false;
        for (const TensorRecord* p : batch) placeholders = placeholders || !OnDevice(*p);
        const ChunkSteps steps{
            [&](size_t offset, size_t) {
              if (!staged.ok() || !in) return area + offset;
              const size_t k = chunk == 0 ? 0 : offset / chunk;
              // A joined rank's placeholders, fused with GPU tensors, go in once every
              // chunk's copy (which covers their places too) is done.
              const gpu::Event e = placeholders ? s.chunk_events_[chunks - 1] : s.chunk_events_[k];
              if (placeholders && k > 0) return area + offset;
              staged = s.AwaitDevice(e);
              if (staged.ok()) {
                if (placeholders) s.HostPartsIn(batch, area);
                return area + offset;
              }
              s.LetGoPinned();
              area = s.IdentityScratch(batch, bytes + trailer);
              return area + offset;
            },
            [&](size_t offset, size_t n) {
              if (!staged.ok() || !back.ok() || !told.named.ok() || !out || n == 0) return;
              std::byte* to = fused ? s.packed_ : static_cast<std::byte*>(batch.front()->output);
              queued = true;
              back = s.device_->Copy(to + offset, s.pinned_ + offset, n,
                                     gpu::CopyKind::kHostToDevice, s.stream_);
            }};
        const Status st = RunInChunks(
            a.data, m, bytes, chunk, steps,
            {a.rank, a.size,
             [&] { return in && !staged.ok() ? BatchPart::kPlaceholders : BatchPart::kWhole; },
             &told});
        if (staged.ok() && back.ok() && told.named.ok() && out && fused)
          back = s.Packing(batch, false);
        if (queued) {
          // The handles complete now. The copies still queued (back, or in after a
          // failure) end with this event, which they wait for or hand to a stream,
          // and which keeps the tensors until then. Without one, the host waits.
          Status marked = s.MarkDone(batch, a.rank);
          if (!marked.ok()) marked = s.Sync("copying the results to the device");
          if (back.ok()) back = marked;
        }
        if (!staged.ok()) return staged.WithContext(step);
        HORA_RETURN_IF_ERROR(st);
        HORA_RETURN_IF_ERROR(told.status());
        if (!back.ok()) return back.WithContext("copying the results to the device");
        return Status::Ok();
      }};
  return kRow;
}

}  // namespace hora
