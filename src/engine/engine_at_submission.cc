// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A one-rank engine's GPU allreduces and broadcasts, run at submission.
//
// With one rank there is nobody to agree with: a cycle would only take the
// tensor, find it ready and run it. A lone tensor that the device backend
// runs on the GPU alone (DeviceBatches::RunsAtSubmission: an allreduce, not
// Adasum, or a broadcast, of a GPU tensor, not sent to NCCL) runs on the
// submitting thread at once, as a cycle would run it, when nothing else is
// under way: no cycle in progress (cycle_mu_ free), nothing queued or taken
// (a cycle would take those first), the engine not stopping. Otherwise it
// is queued as usual.
// Its GPU work is queued on the engine's stream as a cycle's would be, and
// its handle completes with the event of that work.
//
// What a user sees differently: such a tensor has no "queued" and
// "negotiating" spans in the timeline (its collective's span only), and
// counts in no cycle or cache counter. A burst of them is not fused: each
// out-of-place one is its own copy (a launch each), where a cycle would
// have copied the burst's tensors in one. (In place, the usual case, there
// is nothing to copy.)
#include "engine/engine.h"

namespace hora {

bool Engine::RunsAtSubmission(const RequestMeta& m) const {
  return device_ && device_->RunsAtSubmission(m);
}

bool Engine::RunNow(Submission& s, Handle* handle) {
  if (!cycle_mu_.try_lock()) return false;
  MutexLock cycle(cycle_mu_, std::adopt_lock);
  if (finished_ || !negotiator_.nothing_taken()) return false;
  TensorRecord* p = nullptr;
  {
    MutexLock lock(mu_);
    if (!stopped_.ok() || stop_requested_ || !queue_.empty()) return false;
    if (s.name().size() > kMaxNameBytes) return false;  // (Queue says why)
    TensorRecord& r = records_.Get(s.name());
    if (r.in_flight) return false;  // (Queue says so)
    records_.Claim(r, std::move(s), timeline_ != nullptr);
    r.handle = MakeHandle(r);
    *handle = r.handle;
    cycle_timeline_ = timeline_;
    p = &r;
  }
  p->listed = true;
  negotiator_.Take(p, Clock::now());
  batch_.assign(1, p);
  RunBatch(batch_, false);  // (finishes it: its handle completes)
  last_cycle_end_.store(Clock::now().time_since_epoch().count(), std::memory_order_release);
  return true;
}

}  // namespace hora
