// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Join in the engine: announcements from the coordinator, and the stand-ins
// (identity values) a joined rank reduces with.
#include <algorithm>

#include "collectives/kernels/identity.h"
#include "engine/engine.h"

namespace hora {

void Engine::ApplyJoin(const Response& r) {
  if (!r.error.empty()) {
    Finish(r.params.name, InvalidArgument(r.error));
    return;
  }
  const auto who = static_cast<size_t>(r.rows.at(0));
  if (r.rows.at(1) == 0) {
    joined_[who] = true;
    ++joined_count_;
    return;
  }
  // Every rank has joined: the join is over; its result is the last rank.
  std::fill(joined_.begin(), joined_.end(), false);
  joined_count_ = 0;
  Pending* p = FindTaken(r.params.name);
  if (p == nullptr) return;
  Tensor last(DataType::kInt32, {});
  *static_cast<int32_t*>(last.data()) = static_cast<int32_t>(who);
  p->output = std::move(last);
  Finish(std::vector<Pending*>{p}, Status::Ok());
}

Engine::Pending* Engine::AddPhantom(const Response& r) {
  Pending& p = phantoms_[r.params.name];
  p.phantom = true;
  p.sub.meta = r.params;
  p.scratch.emplace(r.params.dtype, r.params.shape);
  FillIdentity(r.params.dtype, r.params.reduction.op, p.scratch->data(), p.scratch->num_elements());
  p.sub.input = p.sub.output = p.scratch->data();
  p.taken = Clock::now();
  return &p;
}

}  // namespace hora
