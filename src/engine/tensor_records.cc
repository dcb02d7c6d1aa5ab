// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/tensor_records.h"

namespace hora {

void TensorRecord::Reset() {
  ResetNegotiation();
  rows.clear();
  result.reset();
  received_splits.clear();
  on_device.reset();
  nccl_number = 0;
}

TensorRecord* TensorRecords::Find(const std::string& name) {
  auto it = by_name_.find(name);
  return it != by_name_.end() ? &it->second : nullptr;
}

void TensorRecords::Claim(TensorRecord& r, Submission&& s, bool stamp) {
  if (r.idle) {
    idle_.Remove(&r);
    r.idle = false;
  }
  r.in_flight = true;
  // The name is the record's (it was found by it): a new record copies it
  // once. The shape goes into the record's vector, kept from one tensor of
  // the name to the next (Submission::shape_of). A cached decision
  // (Ticket::cache_gen) holds for the same parameters only.
  if (r.meta.name.empty()) r.meta.name = s.name();
  const std::vector<int64_t>& shape = s.shape_of != nullptr ? *s.shape_of : s.meta.shape;
  bool same = r.meta.shape == shape;
  if (!same) r.meta.shape.assign(shape.begin(), shape.end());
  same = r.meta.TakeAllButNameAndShape(std::move(s.meta)) && same;
  if (!same) r.cache_gen = 0;
  r.input = s.input;
  r.output = s.output;
  // Only the timeline shows how long a tensor was queued, and a clock read
  // per tensor is a measurable part of a cached tensor's cost
  // (docs/dev/performance.md).
  r.submitted = stamp ? Clock::now() : TimePoint{};
}

void TensorRecords::Release(TensorRecord* r) {
  r->in_flight = false;
  if (!r->meta.cacheable) {  // (generated names never come back)
    by_name_.erase(by_name_.find(r->meta.name));
    return;
  }
  idle_.PushBack(r);
  r->idle = true;
  if (idle_.size() > keep_) {
    TensorRecord* oldest = idle_.front();
    idle_.Remove(oldest);
    by_name_.erase(by_name_.find(oldest->meta.name));
  }
}

TensorRecord* Placeholders::Add(const Response& r, CollectiveBackend& data) {
  TensorRecord& p = by_name_[r.params.name];
  p.phantom = true;
  p.meta = r.params;
  p.scratch.emplace(r.params.dtype, r.params.shape);
  data.FillIdentity(r.params.dtype, r.params.reduction.op, p.scratch->data(),
                    p.scratch->num_elements());
  p.input = p.output = p.scratch->data();
  p.taken = Clock::now();
  return &p;
}

}  // namespace hora
