// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Join in the engine: the end of a join, or its error. Who has joined is
// the negotiator's to know; a joined rank's placeholders are Placeholders.
#include "engine/engine.h"

namespace hora {

void Engine::ApplyJoin(const Response& r) {
  if (!r.error.empty()) {
    Finish(r.params.name, InvalidArgument(r.error));
    return;
  }
  if (r.rows.at(1) == 0) return;  // a rank joined
  // Every rank has joined: the join is over; its result is the last rank.
  const auto who = r.rows.at(0);
  TensorRecord* p = FindTaken(r.params.name);
  if (p == nullptr) return;
  Tensor last(DataType::kInt32, {});
  *static_cast<int32_t*>(last.data()) = static_cast<int32_t>(who);
  p->result = std::move(last);
  Finish(std::vector<TensorRecord*>{p}, Status::Ok());
}

}  // namespace hora
