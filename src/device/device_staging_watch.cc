// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// DeviceStaging's watch of NCCL's work (device_staging.h): the NCCL
// batches not yet ended on the GPU, the warnings and the abort past the
// timeout, and the waits for the device that look for a lost peer while
// such work is pending.
#include "device/device_staging.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace hora {

Status DeviceStaging::AwaitDevice(gpu::Event e, Duration bound) {
  return AwaitDevice([&](TimePoint end) { return device_->Wait(e, end); }, bound);
}

Status DeviceStaging::AwaitDevice(const std::function<Status(TimePoint)>& wait, Duration bound) {
  const TimePoint start = Clock::now();
  const TimePoint until = DeadlineAfter(start, bound);
  bool sliced = false;
  for (;;) {
    // (In slices while NCCL's work is pending: it may wait for a peer that
    // was lost, and the wait would then wait for it, to the timeout.)
    const TimePoint end = nccl_pending_.empty()
                              ? until
                              : std::min(until, Clock::now() + std::chrono::milliseconds(100));
    const Status st = wait(end);
    if (st.ok() || st.code() != StatusCode::kTimeout) return st;
    if (end >= until) {
      if (!sliced) return st;
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.1f s", DurationToSeconds(Clock::now() - start));
      // (The windows wait half of HORA_TIMEOUT_S, to step before the peers
      // time out: DeviceStaging::Windows.)
      return TimeoutError("the device's work had not ended after " + std::string(secs) +
                          (bound == timeout_ ? " (HORA_TIMEOUT_S, or 10 minutes when that is 0): "
                                             : " (half of HORA_TIMEOUT_S): ") +
                          st.message());
    }
    sliced = true;
    PruneNcclPending();
    if (!nccl_pending_.empty()) {
      AbortNcclIfItCannotEnd(nccl_pending_.front().what + " (found while waiting for the device)");
    }
  }
}

bool DeviceStaging::AbortNcclIfItCannotEnd(const std::string& oldest) {
  if (lost_peer_) {
    if (const Status lost = lost_peer_(); !lost.ok()) {
      nccl_.Abort(oldest +
                  ": its NCCL work cannot end, a rank of the job being lost: " + lost.ToString());
      return true;
    }
  }
  if (const Status e = nccl_.AsyncError(); !e.ok()) {
    nccl_.Abort(oldest +
                ": its NCCL work cannot end, NCCL having reported an error: " + e.ToString());
    return true;
  }
  return false;
}

void DeviceStaging::PruneNcclPending() {
  std::string failed;
  std::erase_if(nccl_pending_, [&](const NcclPending& p) {
    if (!p.done->Reached()) return false;
    if (failed.empty()) {
      if (const Status f = p.done->DeviceFailure(); !f.ok()) failed = p.what + ": " + f.ToString();
    }
    return true;
  });
  // A GPU that failed (a fault is for good) makes none of this rank's NCCL
  // work; the others' kernels wait for it. Aborted now, this rank says so
  // at the next NCCL batch, and across hosts NCCL tells the others at once
  // (ncclRemoteError: AbortNcclIfItCannotEnd).
  if (!failed.empty()) {
    nccl_.Abort(failed + " (its GPU failed, so its NCCL work cannot be made)");  // (clears them)
    return;
  }
  if (!nccl_pending_.empty()) StartTheClock(nccl_pending_.front(), Clock::now());
}

void DeviceStaging::StartTheClock(NcclPending& p, TimePoint now) {
  if (p.watched) return;
  p.watched = true;
  p.since = std::max(p.since, now);
  const Duration warn_every = nccl_.settings().warn_every;
  p.warn_at = warn_every > Duration::zero() ? p.since + warn_every : TimePoint::max();
}

void DeviceStaging::NcclQueued(const RequestMeta& m, int rank) {
  if (last_done_) {
    std::string what =
        "rank " + std::to_string(rank) + ": " + OpTypeName(m.op) + " '" + m.name + "'";
    if (!nccl_.settings().label.empty()) what += " of " + nccl_.settings().label;
    nccl_pending_.push_back({last_done_, Clock::now(), std::move(what)});
  }
  // (After the push: an abort here fails this batch too.)
  PruneNcclPending();
}

void DeviceStaging::WatchNccl(TimePoint now, bool stopped) {
  if (nccl_pending_.empty() || now < next_watch_) return;
  next_watch_ = now + std::chrono::milliseconds(50);
  PruneNcclPending();
  if (nccl_pending_.empty()) return;
  // Only the oldest is watched: the later ones wait behind it, on the one
  // stream. Its clock started when a prune found it the oldest not ended
  // (or when it was queued, if later), so that work queued before it is not
  // counted.
  NcclPending& p = nccl_pending_.front();
  const Duration warn_every = nccl_.settings().warn_every;
  if (AbortNcclIfItCannotEnd(p.what)) return;
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f s", DurationToSeconds(now - p.since));
  if (now - p.since >= timeout_) {
    // (Abort fails every pending batch, this one first among them.)
    nccl_.Abort(p.what + ": its NCCL work had not ended on the GPU " + secs +
                " after the work before it (HORA_TIMEOUT_S, or 10 minutes when that is 0): a "
                "rank of its communicator did not make its calls, or a GPU is stuck" +
                (follows_other_sets_
                     ? std::string(", or process sets that share ranks had their collectives "
                                   "submitted in different orders on different ranks (on a "
                                   "rank's GPU, one set's NCCL work waits for the work of "
                                   "other sets queued before it)")
                     : std::string()));
    return;
  }
  const Logger* logger = nccl_.settings().logger;
  if (now >= p.warn_at && logger != nullptr) {
    logger->Warning(p.what + ": its NCCL work has not ended on the GPU " + secs +
                    " after the work before it. NCCL's kernels wait for every rank of the "
                    "communicator: a rank that did not make its calls (its error says why) "
                    "holds the others " +
                    (stopped ? std::string("until the timeout (the engine has stopped: no NCCL "
                                           "batch follows)")
                             : std::string("until the next NCCL batch, or until the timeout")));
    p.warn_at = now + warn_every;
  }
}

void DeviceStaging::FailNcclPending(const std::string& why) {
  const Status cut =
      AbortedError("its NCCL work was cut short: the NCCL communicator was aborted (" + why +
                   ") before it ended");
  for (const NcclPending& p : nccl_pending_) p.done->FailIfPending(cut);
  nccl_pending_.clear();
}

}  // namespace hora
