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
#include "engine/fusion.h"
#include "engine/negotiator.h"
#include "engine/set_bits.h"
#include "engine/whole_groups.h"

namespace hora {

bool Negotiator::PlanCarried(CarriedAllreduce* out) {
  CycleOutcome& o = outcome_;
  o.carried_batch.clear();
  carried_parts_.clear();
  carried_metas_.clear();
  // (Where the AND cannot carry -- one rank, or ranks on several hosts --
  // nothing is planned either.)
  const size_t words = words_.size();
  if (joined_count_ > 0 || marked_.empty() || !control_.CanCarry(words, 0)) return false;
  // The decisions the fast path would make if the AND kept every bit: this
  // rank's tensors in bit order, each group whole (WholeGroups, the fast
  // path's rule), fused as the fast path would fuse them (FusesIntoOneBatch), into
  // one batch of allreduces on the CPU. Read from the tickets, whose metas
  // equal their cache entries' in everything these rules read (a hit is
  // RequestMeta::SameParams) and are still warm in cache: the entries are
  // not, a few cache lines per tensor after the step's data went through.
  WholeGroups groups;
  ForEachSetBit(words_.data(), cache_.capacity(), [&](size_t b) {
    Ticket* t = by_bit_[b];
    o.carried_batch.push_back(t);
    carried_metas_.push_back(&t->meta);
    groups.Count(t->meta);
  });
  for (const RequestMeta* m : carried_metas_) {
    if (!groups.Whole(*m)) return false;
  }
  const RequestMeta& m = *carried_metas_.front();
  if (m.op != OpType::kAllreduce || m.device != DeviceType::kCPU ||
      m.reduction.op == ReduceOp::kAdasum) {
    return false;
  }
  uint64_t bytes = 0;
  if (!FusesIntoOneBatch(carried_metas_, fusion_threshold_, group_fusion_, &bytes)) return false;
  if (bytes == 0 || !control_.CanCarry(words, bytes)) return false;
  carried_parts_.reserve(o.carried_batch.size());
  for (const Ticket* t : o.carried_batch) {
    carried_parts_.push_back({t->input, t->output, t->meta.num_elements()});
  }
  *out = {carried_parts_, m.dtype, m.reduction};
  return true;
}

}  // namespace hora
