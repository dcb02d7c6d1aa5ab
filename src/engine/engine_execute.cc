// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The second half of a cycle: carrying out its decisions (Engine::Execute).
// This rank's tensors are found, errors are delivered, and the ready ones run
// in the batches the negotiator planned. Each batch's handles are then
// completed. A steady cached cycle has no decisions: its one batch already
// ran with the bit vector, and Execute only finishes it.
#include "engine/engine.h"
#include "engine/run_batch.h"

namespace hora {

void Engine::Execute(const CycleOutcome& outcome) {
  // (A batch that went with the bit vector began when its step did.)
  Timeline* timeline = cycle_timeline_.get();  // (the lambda's, read under cycle_mu_)
  // (Only the timeline reads the clock: each read is a few per cent of a
  // small collective.)
  const TimePoint decided = outcome.carried ? outcome.carried_start
                            : timeline      ? Clock::now()
                                            : TimePoint{};
  auto negotiated = [&](const TensorRecord* p) {
    timeline->Span(p->meta.name, "negotiating", p->taken, decided,
                   "{\"params\":" + JsonQuote(p->meta.DescribeParams()) + "}");
  };
  if (outcome.carried) {
    // A steady cached cycle: no decisions; its batch already ran with the
    // bit vector, so there is nothing to find, plan or run.
    batch_.clear();
    for (Ticket* t : outcome.carried_batch) batch_.push_back(static_cast<TensorRecord*>(t));
    {
      MutexLock lock(mu_);
      ++stats_.carried_batches;
      if (batch_.size() > 1) ++stats_.fused_batches;
    }
    if (cycle_timeline_) {
      for (const TensorRecord* p : batch_) negotiated(p);
      SpanBatch(batch_, outcome.carried_start, Status::Ok());
    }
    Finish(batch_, Status::Ok());
    return;
  }
  const std::vector<Decision>& decisions = outcome.decisions;
  // This rank's tensor of each decision: the fast path's come with it, the
  // slow path's are found by name, with one lock; a joined rank without
  // one reduces a placeholder.
  std::vector<TensorRecord*> mine(decisions.size(), nullptr);
  bool by_name = false;
  for (size_t i = 0; i < decisions.size(); ++i) {
    mine[i] = static_cast<TensorRecord*>(decisions[i].mine);
    by_name = by_name || (mine[i] == nullptr && decisions[i].response->params.op != OpType::kJoin);
  }
  if (by_name) {
    MutexLock lock(mu_);
    for (size_t i = 0; i < decisions.size(); ++i) {
      const Response& r = *decisions[i].response;
      if (mine[i] == nullptr && r.params.op != OpType::kJoin) {
        mine[i] = FindTakenLocked(r.params.name);
      }
    }
  }
  for (size_t i = 0; i < decisions.size(); ++i) {
    const Decision& d = decisions[i];
    const Response& r = *d.response;
    if (r.params.op == OpType::kJoin) {
      ApplyJoin(r);
      continue;
    }
    if (mine[i] == nullptr) {
      if (d.placeholder) mine[i] = placeholders_.Add(r, data_);
      continue;
    }
    if (!r.error.empty()) {
      const RequestMeta& m = mine[i]->meta;
      const std::string what = "rank " + std::to_string(job_rank_) + ": " + r.error;
      // (A call this rank refused fails with its own error, as it would have
      // alone; the others' with the refusal, which names its rank.)
      const bool timed_out = r.error.rfind("stalled", 0) == 0 || r.error.rfind("timed out", 0) == 0;
      Status failed = !m.refused.empty()          ? Status(m.refused_code, m.refused)
                      : timed_out                 ? TimeoutError(what)
                      : !r.params.refused.empty() ? MismatchError(r.error)
                                                  : MismatchError(what);
      if (cycle_timeline_) {
        // (Its negotiation is all it had: shown, failed, with the error.)
        timeline->Span(m.name, "negotiating", mine[i]->taken, decided,
                       "{\"params\":" + JsonQuote(m.DescribeParams()) +
                           ",\"ok\":false,\"error\":" + JsonQuote(failed.ToString()) + "}");
      }
      Finish(std::vector<TensorRecord*>{mine[i]}, std::move(failed));
      mine[i] = nullptr;
      continue;
    }
    mine[i]->rows = r.rows;
    if (cycle_timeline_) negotiated(mine[i]);
  }
  for (const std::vector<size_t>& plan : outcome.batches) {
    batch_.clear();
    bool joined_any = false;
    for (size_t i : plan) {
      if (mine[i] != nullptr) batch_.push_back(mine[i]);  // (this rank takes part in each)
      joined_any = joined_any || decisions[i].joined_any;
    }
    if (!batch_.empty()) RunBatch(batch_, joined_any);
  }
}

void Engine::RunBatch(const std::vector<TensorRecord*>& batch, bool joined_any) {
  const RequestMeta& m = batch.front()->meta;
  const TimePoint start = cycle_timeline_ ? Clock::now() : TimePoint{};
  Status st = DeviceBatches::Takes(batch)
                  ? RunOnDevice(batch, joined_any)
                  : RunPlannedBatch(data_, batch, rank_, size_, &fusion_, outputs_.get());
  if (!st.ok()) {
    st = st.WithContext(std::string(OpTypeName(m.op)) + " '" + m.name + "'");
  } else if (batch.size() > 1) {
    MutexLock lock(mu_);
    ++stats_.fused_batches;
  }
  if (cycle_timeline_) SpanBatch(batch, start, st);
  Finish(batch, std::move(st));
}

Status Engine::RunOnDevice(const std::vector<TensorRecord*>& batch, bool joined_any) {
  if (!device_) return InternalError("a GPU tensor reached an engine with no device backend");
  const uint64_t before = device_->batches();
  const Status st = device_->Run(batch, joined_any, &fusion_);
  if (device_->batches() != before) {
    std::map<std::string, uint64_t> counts = device_->route_batches();
    MutexLock lock(mu_);
    stats_.gpu_route_batches = std::move(counts);
  }
  return st;
}

void Engine::SpanBatch(const std::vector<TensorRecord*>& batch, TimePoint start, const Status& st) {
  const TimePoint end = Clock::now();
  const char* op = OpTypeName(batch.front()->meta.op);
  const std::string args = "{\"fused\":" + std::to_string(batch.size()) +
                           ",\"ok\":" + (st.ok() ? "true" : "false") + "}";
  for (const TensorRecord* p : batch) cycle_timeline_->Span(p->meta.name, op, start, end, args);
}

}  // namespace hora
