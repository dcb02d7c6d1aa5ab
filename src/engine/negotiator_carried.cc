// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A cached cycle's allreduce sent along with the bit vector. In steady
// training every rank has the same cached tensors ready in a cycle, and
// they make one fused allreduce: each rank guesses that the AND will keep
// all of its bits, and sends that allreduce's data with its bit vector
// (ControlPlane::AndCarrying). If every rank's bits and allreduce agree,
// the allreduce goes on from there (a cached cycle takes one lockstep step
// fewer: two instead of three, or one instead of two for a small one);
// otherwise the data is dropped and the cycle goes on as it would have.
// Every rank sees every rank's bits, so all decide alike.
#include "engine/negotiator.h"

namespace hora {

bool Negotiator::PlanCarried(CarriedAllreduce* out) {
  CycleOutcome& o = outcome_;
  o.carried_batch.clear();
  carried_parts_.clear();
  // (Where the AND cannot carry -- one rank, or ranks on several hosts --
  // nothing is planned either.)
  const size_t words = words_.size();
  if (joined_count_ > 0 || marked_.empty() || !control_.CanCarry(words, 0)) return false;
  // The decisions the fast path would make if the AND kept every bit, with
  // their fusion plan: one batch of allreduces on the CPU, or nothing.
  predicted_.clear();
  predicted_bits_.clear();
  CachedDecisions(words_.data(), &predicted_, &predicted_bits_, &partial_);
  if (!partial_.empty() || predicted_.empty()) return false;
  for (const Decision& d : predicted_) {
    if (d.mine == nullptr) return false;  // (a joined rank's: it carries nothing)
  }
  const RequestMeta& m = predicted_.front().response->params;
  if (m.op != OpType::kAllreduce || m.device != DeviceType::kCPU ||
      m.reduction.op == ReduceOp::kAdasum) {
    return false;
  }
  const auto plan = PlanFusion(predicted_);
  if (plan.size() != 1 || plan.front().size() != predicted_.size()) return false;
  size_t bytes = 0;
  for (const Decision& d : predicted_) bytes += d.mine->meta.num_bytes();
  if (bytes == 0 || !control_.CanCarry(words, bytes)) return false;
  carried_parts_.reserve(predicted_.size());
  for (const Decision& d : predicted_) {
    Ticket* t = d.mine;
    o.carried_batch.push_back(t);
    carried_parts_.push_back({t->input, t->output, t->meta.num_elements()});
  }
  *out = {carried_parts_, m.dtype, m.reduction};
  return true;
}

}  // namespace hora
