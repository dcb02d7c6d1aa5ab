// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The second half of a cycle: carrying out its decisions (Engine::Execute).
// This rank's tensors are found, errors are delivered, and the ready ones are
// planned into batches (fusion.h) and run. Each batch's handles are then
// completed. A steady cached cycle has no decisions: its one batch already
// ran with the bit vector, and Execute only finishes it.
#include <algorithm>

#include "engine/engine.h"
#include "engine/fusion.h"

namespace hora {

void Engine::Execute(const std::vector<Decision>& decisions) {
  // (A batch that went with the bit vector began when its step did.)
  const TimePoint decided = carried_.ran ? carried_.start : Clock::now();
  auto negotiated = [&](const std::vector<Pending*>& ready) {
    if (!cycle_timeline_) return;
    for (Pending* p : ready) {
      cycle_timeline_->Span(p->sub.meta.name, "negotiating", p->taken, decided,
                            "{\"params\":" + JsonQuote(p->sub.meta.DescribeParams()) + "}");
    }
  };
  if (carried_.ran) {
    // A steady cached cycle: no decisions (Negotiate made none); its batch
    // already ran with the bit vector, so there is nothing to find, plan or
    // run.
    carried_.ran = false;
    negotiated(carried_.batch);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.carried_batches;
      if (carried_.batch.size() > 1) ++stats_.fused_batches;
    }
    if (cycle_timeline_) {
      SpanBatch(carried_.batch, carried_.start, Status::Ok());
    }
    Finish(carried_.batch, Status::Ok());
    return;
  }
  std::vector<Pending*> ready;
  std::vector<const RequestMeta*> metas;
  ready.reserve(decisions.size());
  metas.reserve(decisions.size());
  // This rank's tensors of the slow path's decisions, found with one lock
  // (the fast path's come with their decisions).
  std::vector<Pending*> found(decisions.size(), nullptr);
  if (std::any_of(decisions.begin(), decisions.end(),
                  [](const Decision& d) { return d.pending == nullptr; })) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < decisions.size(); ++i) {
      const Response& r = *decisions[i].response;
      if (decisions[i].pending == nullptr && r.params.op != OpType::kJoin) {
        found[i] = FindTakenLocked(r.params.name);
      }
    }
  }
  for (size_t i = 0; i < decisions.size(); ++i) {
    const Decision& decision = decisions[i];
    const Response& r = *decision.response;
    if (r.params.op == OpType::kJoin) {
      ApplyJoin(r);
      continue;
    }
    Pending* mine = decision.pending ? decision.pending : found[i];
    if (mine == nullptr) {
      // A tensor this rank never had: an allreduce it joins with identity
      // values once out of data; otherwise nothing to do here.
      if (!r.error.empty() || !joined_[static_cast<size_t>(rank_)] ||
          r.params.op != OpType::kAllreduce) {
        continue;
      }
      Pending* p = AddPhantom(r);
      ready.push_back(p);
      metas.push_back(&p->sub.meta);
      continue;
    }
    if (!r.error.empty()) {
      const std::string what = "rank " + std::to_string(rank_) + ": " + r.error;
      Finish(std::vector<Pending*>{mine},
             r.error.rfind("stalled", 0) == 0 || r.error.rfind("timed out", 0) == 0
                 ? TimeoutError(what)
                 : MismatchError(what));
      continue;
    }
    ready.push_back(mine);
    metas.push_back(&mine->sub.meta);
    mine->rows = r.rows;
  }
  negotiated(ready);
  std::vector<std::vector<Pending*>> batches;
  for (const auto& plan :
       PlanBatches(metas, config_.fusion_threshold_bytes, config_.disable_group_fusion != "1")) {
    batches.emplace_back();
    for (size_t i : plan) batches.back().push_back(ready[i]);
  }
  for (auto& batch : batches) RunBatch(batch);
}

void Engine::RunBatch(const std::vector<Pending*>& batch) {
  const RequestMeta& m = batch.front()->sub.meta;
  const TimePoint start = Clock::now();
  Status st;
  switch (m.op) {
    case OpType::kAllreduce:
      st = RunAllreduceBatch(batch);
      break;
    case OpType::kBroadcast:
      st = data_.Broadcast(batch.front()->sub.input, m.num_bytes(), m.root);
      break;
    case OpType::kBarrier:
      st = data_.Barrier();
      break;
    case OpType::kJoin:  // applied where decided (ApplyJoin), never batched
      break;
    case OpType::kAllgather:
    case OpType::kReducescatter:
    case OpType::kAlltoall:
      st = RunShaped(*batch.front());
      break;
  }
  if (!st.ok()) st = st.WithContext(std::string(OpTypeName(m.op)) + " '" + m.name + "'");
  if (cycle_timeline_) SpanBatch(batch, start, st);
  Finish(batch, std::move(st));
}

void Engine::SpanBatch(const std::vector<Pending*>& batch, TimePoint start, const Status& st) {
  const TimePoint end = Clock::now();
  const char* op = OpTypeName(batch.front()->sub.meta.op);
  const std::string args = "{\"fused\":" + std::to_string(batch.size()) +
                           ",\"ok\":" + (st.ok() ? "true" : "false") + "}";
  for (const Pending* p : batch) cycle_timeline_->Span(p->sub.meta.name, op, start, end, args);
}

Status Engine::RunAllreduceBatch(const std::vector<Pending*>& batch) {
  const RequestMeta& m = batch.front()->sub.meta;
  // Joined ranks contribute identity values; Average still divides by the
  // whole set's size, as Horovod's (a joined rank counts as a zero).
  const Reduction red = m.reduction;
  if (batch.size() == 1) {
    const Submission& s = batch.front()->sub;
    return data_.Allreduce({s.input, s.output, m.num_elements(), m.dtype, red});
  }
  // Fused: the backend packs the tensors into fusion_ (or, on a shared
  // window, reads and writes them where they are).
  std::vector<AllreducePart> parts;
  parts.reserve(batch.size());
  for (Pending* p : batch) {
    parts.push_back({p->sub.input, p->sub.output, p->sub.meta.num_elements()});
  }
  HORA_RETURN_IF_ERROR(data_.AllreduceParts(parts, m.dtype, red, fusion_));
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.fused_batches;
  return Status::Ok();
}

}  // namespace hora
