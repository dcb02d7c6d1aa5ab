// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The engine's records of tensor names (Engine::Pending): claimed by a
// submission, listed while a cycle has the tensor, found by name, and
// released -- kept idle for the name's next tensor, or dropped -- when the
// tensor is finished.
#include <algorithm>

#include "common/clock.h"
#include "engine/engine.h"

namespace hora {

void Engine::Pending::Reset() {
  state = State::kNew;
  counted = false;
  rows.clear();
  output.reset();
  received_splits.clear();
}

void Engine::Claim(Pending& p, Submission&& s) {
  if (p.idle) {
    idle_.Remove(&p);
    p.idle = false;
  }
  p.in_flight = true;
  // Both metas without their shapes for a moment: the record's vector,
  // kept, takes the new shape (Submission::shape_of).
  std::vector<int64_t> given = std::move(s.meta.shape);  // (empty with shape_of)
  const std::vector<int64_t>& shape = s.shape_of != nullptr ? *s.shape_of : given;
  std::vector<int64_t> kept = std::move(p.sub.meta.shape);
  if (p.cache_gen != 0 && !(kept == shape && p.sub.meta == s.meta)) p.cache_gen = 0;  // (Pending)
  if (s.shape_of != nullptr) {
    kept.assign(shape.begin(), shape.end());
  } else {
    kept = std::move(given);
  }
  s.meta.shape = std::move(kept);
  s.shape_of = nullptr;
  p.sub = std::move(s);
  // Only the timeline shows how long a tensor was queued, and a clock read
  // per tensor was 8% of a cached tensor's cost (np 1; about 20 ns here).
  if (timeline_) p.sub.submitted = Clock::now();
  if (queue_.empty()) first_queued_ = Clock::now();
  queue_.push_back(&p);
}

Engine::Pending* Engine::FindTaken(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  return FindTakenLocked(name);
}

Engine::Pending* Engine::FindTakenLocked(const std::string& name) {
  auto it = names_.find(name);
  return it != names_.end() && it->second.listed ? &it->second : nullptr;
}

void Engine::Finish(const std::string& name, Status st) {
  if (Pending* p = FindTaken(name)) Finish(std::vector<Pending*>{p}, std::move(st));
}

void Engine::Finish(const std::vector<Pending*>& done, Status st) {
  if (!st.ok() && !label_.empty()) st = st.WithContext(label_);
  std::vector<Completion>& completions = finishing_.completions;
  std::vector<Pending*>& records = finishing_.records;
  struct Clear {
    FinishScratch& f;
    ~Clear() {
      f.completions.clear();  // the handles, at once
      f.records.clear();
    }
  } clear{finishing_};
  // Idle records kept for the names' next tensors, at most this many
  // (records of names that are not cacheable are dropped at once: generated
  // names never come back).
  const size_t keep = std::max<size_t>(kKeptRecords, cache_.capacity());
  for (Pending* p : done) {
    if (p->phantom) {
      phantoms_.erase(phantoms_.find(p->sub.meta.name));
      continue;
    }
    completions.push_back(
        {std::move(p->sub.handle), std::move(p->output), std::move(p->received_splits)});
    taken_.Remove(p);
    p->listed = false;
    p->Reset();
    records.push_back(p);
  }
  {
    // From here on a record may be reused (or erased): not read after.
    std::lock_guard<std::mutex> lock(mu_);
    for (Pending* p : records) {
      p->in_flight = false;
      ++stats_.tensors;
      if (!p->sub.meta.cacheable) {
        names_.erase(names_.find(p->sub.meta.name));
        continue;
      }
      idle_.PushBack(p);
      p->idle = true;
      if (idle_.size() > keep) {
        Pending* oldest = idle_.front();
        idle_.Remove(oldest);
        names_.erase(names_.find(oldest->sub.meta.name));
      }
    }
  }
  for (Completion& c : completions) {
    if (!st.ok()) c.output.reset();
    c.handle->Complete(st, std::move(c.output), std::move(c.received));
  }
}

}  // namespace hora
