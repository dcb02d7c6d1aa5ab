// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The engine's records of tensor names (TensorRecord): claimed by a
// submission, listed while a cycle has the tensor, found by name, and
// released -- kept idle for the name's next tensor, or dropped -- when the
// tensor is finished.
#include "common/clock.h"
#include "engine/engine.h"

namespace hora {

void Engine::Claim(TensorRecord& p, Submission&& s, Handle* handle) {
  records_.Claim(p, std::move(s), timeline_ != nullptr);
  p.handle = MakeHandle(p);
  *handle = p.handle;
  if (device_) device_->Claimed(p);
  if (queue_.empty()) first_queued_ = Clock::now();
  queue_.push_back(&p);
}

Handle Engine::MakeHandle(TensorRecord& p) {
  for (Handle& k : p.kept) {
    if (k.state() != nullptr && k.state()->OnlyHolder()) {
      k.state()->Renew();
      std::swap(k, p.kept[0]);  // (the newest first)
      return p.kept[0];
    }
  }
  Handle h(new Handle::State(p.meta.name, spin_));
  h.state()->gate = gate_;
  p.kept[1] = std::move(p.kept[0]);
  p.kept[0] = h;
  return h;
}

TensorRecord* Engine::FindTaken(const std::string& name) {
  MutexLock lock(mu_);
  return FindTakenLocked(name);
}

TensorRecord* Engine::FindTakenLocked(const std::string& name) {
  TensorRecord* r = records_.Find(name);
  return r != nullptr && r->listed ? r : nullptr;
}

void Engine::Finish(const std::string& name, Status st) {
  if (TensorRecord* p = FindTaken(name)) Finish(std::vector<TensorRecord*>{p}, std::move(st));
}

void Engine::Finish(const std::vector<TensorRecord*>& done, Status st) {
  // (A failed negotiation's message names the set already: the control
  // Comm's subject holds the label.)
  if (!st.ok() && !label_.empty() && st.message().find(label_) == std::string::npos)
    st = st.WithContext(label_);
  if (tuner_ && !tuner_->done() && st.ok()) Score(done, Clock::now());  // (while it tunes)
  std::vector<Completion>& completions = finishing_.completions;
  std::vector<TensorRecord*>& records = finishing_.records;
  struct Clear {
    FinishScratch& f;
    ~Clear() {
      f.completions.clear();  // the handles, at once
      f.records.clear();
    }
  } clear{finishing_};
  for (TensorRecord* p : done) {
    if (p->phantom) {  // (never taken)
      placeholders_.Remove(p);
      continue;
    }
    // (Not kept where it will hold an output: nothing would free that.)
    if (p->result || p->on_device) p->kept[0] = Handle();  // (its own: the newest)
    completions.push_back({std::move(p->handle), std::move(p->result),
                           std::move(p->received_splits), std::move(p->on_device)});
    negotiator_.Release(p);
    if (device_) device_->Released(*p);
    p->listed = false;
    p->Reset();
    records.push_back(p);
  }
  finished_tensors_ += records.size();
  {
    // From here on a record may be reused (or erased): not read after.
    MutexLock lock(mu_);
    stats_.tensors += records.size();
    for (TensorRecord* p : records) records_.Release(p);
  }
  for (Completion& c : completions) {
    // (A failed batch keeps its copies' event: until the device reached it,
    // Poll() is false, and the tensors are kept.)
    if (!st.ok()) c.output.reset();
    c.handle.state()->Complete(st, std::move(c.output), std::move(c.received),
                               std::move(c.on_device));
  }
}

}  // namespace hora
