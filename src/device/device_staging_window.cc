// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The route "window" (device_routes.cc): allreduces on the device windows
// (device_staging.h): the window opened at the first batch that may use it,
// among the job's ranks on one host, or each host's where the job spans
// hosts (with the host memory and events of the exchanges across hosts,
// backends/host_tiers.h); the batches run on it; and its close when the
// engine stops.
//
// Its cost: two ranks sharing one H200 (HORA_GPU_IPC=1), 4 B to 16 KiB in
// 81-86 us p50 under CUDA MPS, and 64 MiB in 2,193 us, 31 GB/s
// (docs/dev/gpu_runs.md, 2026-11-26). Against staging in chunks, it is
// predicted to win from about 170 KiB up.
#include "device/device_staging.h"

#include <string>
#include <vector>

#include "collectives/allreduce_device_window.h"
#include "collectives/shared_common.h"

namespace hora {

struct WindowRoute;

template <>
const DeviceStaging::RouteRow& DeviceStaging::Row<WindowRoute>() {
  static constexpr RouteRow kRow = {
      "window",
      "an allreduce on the device windows of one host, or of each host and across "
      "(device_staging_window.cc)",
      {85, 31},
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
      }};
  return kRow;
}

Status DeviceStaging::OpenWindow(CollectiveBackend& data) {
  window_tried_ = true;
  // One host's ranks share a window; a job spanning hosts, each host's
  // ranks theirs, where the hosts have as many ranks (host_tiers.h).
  std::string why_not;
  window_comm_ = windows_.comm != nullptr && SharedUsable(*windows_.comm) ? windows_.comm : nullptr;
  if (window_comm_ == nullptr && windows_.comm != nullptr) {
    HORA_ASSIGN_OR_RETURN(tier_comms_,
                          HostTierComms::Find(*windows_.comm, windows_.selector, &why_not));
    tiers_ = tier_comms_ ? &tier_comms_->tiers() : nullptr;
    if (tiers_ != nullptr) window_comm_ = tiers_->host;
  }
  if (window_comm_ != nullptr) {
    // (Its waits may sit behind NCCL's work on the stream: AwaitDevice.)
    Result<std::unique_ptr<DeviceWindow>> opened = DeviceWindow::Open(
        *window_comm_, device_, stream_, windows_.bytes, windows_.wait, windows_.willing,
        [this](gpu::Event e, Duration bound) { return AwaitDevice(e, bound); }, &why_not);
    if (opened.ok()) {
      window_ = std::move(*opened);
    } else {
      why_not = opened.status().ToString();
    }
  }
  if (tiers_ != nullptr) HORA_RETURN_IF_ERROR(AgreeAcrossHosts(data, &why_not));
  if (!window_ && !why_not.empty() && windows_.logger != nullptr && windows_.willing) {
    windows_.logger->Warning("GPU allreduce is staged through host memory: " + why_not);
  }
  return Status::Ok();
}

Status DeviceStaging::AgreeAcrossHosts(CollectiveBackend& data, std::string* why_not) {
  // Every host's ranks opened their windows, of one size, with host memory
  // for the exchanges across hosts; or no rank uses its window.
  if (window_) {
    Result<void*> pinned = device_->AllocatePinned(window_->half_bytes());
    for (gpu::Event& e : window_events_) {
      if (!pinned.ok()) break;
      Result<gpu::Event> made = device_->CreateEvent();
      if (made.ok()) {
        e = *made;
      } else {
        (void)device_->FreePinned(*pinned);
        pinned = made.status();
      }
    }
    if (pinned.ok()) {
      window_pinned_ = static_cast<std::byte*>(*pinned);
    } else {
      *why_not =
          "rank " + std::to_string(tiers_->host->Number(tiers_->host->rank())) +
          " has no host memory for the exchanges across hosts: " + pinned.status().ToString();
    }
  }
  const int n = tiers_->world;
  const int64_t mine[2] = {window_pinned_ != nullptr ? 1 : 0, static_cast<int64_t>(windows_.bytes)};
  std::vector<int64_t> all(2 * static_cast<size_t>(n));
  const std::vector<size_t> bytes(static_cast<size_t>(n), sizeof mine);
  HORA_RETURN_IF_ERROR(data.Allgatherv(mine, all.data(), bytes));
  std::string missing;
  int count = 0;
  bool sizes = true;
  for (int r = 0; r < n; ++r) {
    if (all[2 * static_cast<size_t>(r)] == 0) missing += (count++ ? ", " : "") + std::to_string(r);
    sizes = sizes && all[2 * static_cast<size_t>(r) + 1] == all[1];
  }
  if (missing.empty() && sizes) return Status::Ok();
  if (!sizes) {
    *why_not = "the ranks asked for GPU windows of different sizes (HORA_GPU_WINDOW_BYTES)";
  } else if (why_not->empty()) {
    *why_not = (count > 1 ? "ranks " : "rank ") + missing + (count > 1 ? " have" : " has") +
               " no GPU window, or no host memory for it";
  }
  // Nobody frees a window another still maps: Close is collective on the
  // host (whose ranks all have one, or none).
  Status closed = window_ ? window_->Close(*window_comm_) : Status::Ok();
  window_.reset();
  FreeWindowPinned();
  return closed;
}

void DeviceStaging::FreeWindowPinned() {
  if (window_pinned_ != nullptr) (void)device_->FreePinned(window_pinned_);
  window_pinned_ = nullptr;
  for (gpu::Event& e : window_events_) {
    if (e.id != 0) (void)device_->DestroyEvent(e);
    e = {};
  }
}

Status DeviceStaging::RunOnWindow(CollectiveBackend& data, const std::vector<TensorRecord*>& batch,
                                  int rank, bool* ran) {
  if (!window_tried_) {
    // (A failed setup fails this batch, and its ranks stage from then on.)
    const Status opened = OpenWindow(data);
    if (!opened.ok()) {
      set_aside_ = true;
      *ran = true;
      return opened;
    }
  }
  // (A host window broken by an earlier failure: staged, as before it.)
  if (!window_ || window_->retired() || set_aside_ || !SharedUsable(*window_comm_)) {
    return Status::Ok();
  }
  *ran = true;
  const RequestMeta& m = batch.front()->meta;
  window_parts_.clear();
  for (const TensorRecord* p : batch) {
    window_parts_.push_back({p->input, p->output, p->meta.num_elements()});
  }
  AcrossHosts across;
  if (tiers_ != nullptr) {
    across =
        AcrossHosts{tiers_->across, tiers_->selector,       window_pinned_,
                    tiers_->world,  routing_.staging_chunk, {window_events_[0], window_events_[1]}};
  }
  const Status st = AllreduceDeviceWindow(*window_comm_, *window_, window_parts_, m.dtype,
                                          m.reduction, tiers_ != nullptr ? &across : nullptr);
  // Across hosts, a failed allreduce fails on every rank (see AcrossHosts),
  // and every rank then stages: after a failed step or exchange (a
  // timeout), hosts could otherwise take different paths. The windows stay
  // open until the engine stops.
  if (!st.ok() && tiers_ != nullptr && !set_aside_) {
    set_aside_ = true;
    if (windows_.logger != nullptr) {
      windows_.logger->Warning(
          "GPU allreduce across hosts is staged through host memory from now on: " + st.ToString());
    }
  }
  // The copies out are queued: the handles hold their event (as in
  // the staged_chunks route), or the host waits for them.
  Status marked = MarkDone(batch, rank);
  if (!marked.ok()) marked = Sync("copying the results out of the GPU window");
  HORA_RETURN_IF_ERROR(st);
  return marked;
}

Status DeviceStaging::CloseWindow() {
  if (!window_) return Status::Ok();
  Status st = window_comm_ != nullptr ? window_->Close(*window_comm_) : Status::Ok();
  const bool left = window_->retired() || !st.ok();
  window_.reset();
  // (A window left in place may still be at work: so may the exchanges'
  // copies, which the destructor's free then waits for.)
  if (!left) FreeWindowPinned();
  return st;
}

}  // namespace hora
