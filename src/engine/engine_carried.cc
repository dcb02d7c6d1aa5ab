// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A cached cycle's allreduce sent along with the bit vector. In steady
// training every rank has the same cached tensors ready in a cycle, and
// they make one fused allreduce: each rank guesses that the AND will keep
// all of its bits, and puts that allreduce's data in the data Comm's window
// as it sends its bit vector (on the control Comm's window). If every rank's bits and allreduce
// agree, the allreduce goes on from there (a cached cycle takes one lockstep step fewer: two
// instead of three, or one instead of two for a small one); otherwise the data is dropped and the
// cycle goes on as it would have. Every rank sees every rank's bits, so all decide alike.
#include "engine/engine.h"
#include "engine/fusion.h"

namespace hora {

bool Engine::PlanCarried(const uint64_t* ready, size_t words, CarriedAllreduce* out) {
  carried_.batch.clear();
  carried_.parts.clear();
  carried_.ran = false;
  // (Without a shared window for the AND -- one rank, or ranks on several
  // hosts -- nothing is carried: no planning either.)
  if (joined_count_ > 0 || marked_.empty() || !AndOnWindow(control_, words)) return false;
  // The decisions Negotiate would make if the AND kept every bit: this
  // rank's tensors in bit order, each group whole.
  std::vector<const RequestMeta*> metas;
  metas.reserve(marked_.size());
  std::unordered_map<std::string_view, uint32_t> groups;
  ForEachSetBit(ready, cache_.capacity(), [&](size_t b) {
    Pending* p = by_bit_[b];
    carried_.batch.push_back(p);
    metas.push_back(&p->sub.meta);
    if (!p->sub.meta.group.empty()) ++groups[p->sub.meta.group];
  });
  for (const RequestMeta* m : metas) {
    if (!m->group.empty() && groups[m->group] < m->group_size) return false;
  }
  const RequestMeta& m = *metas.front();
  if (m.op != OpType::kAllreduce || m.device != DeviceType::kCPU ||
      m.reduction.op == ReduceOp::kAdasum) {
    return false;
  }
  const auto plan =
      PlanBatches(metas, config_.fusion_threshold_bytes, config_.disable_group_fusion != "1");
  if (plan.size() != 1) return false;
  size_t bytes = 0;
  for (const RequestMeta* t : metas) bytes += t->num_bytes();
  if (bytes == 0) return false;
  Comm* comm = data_.SharedWindowComm(bytes);
  if (comm == nullptr || bytes > CarriableBytes(control_, *comm, words)) return false;
  carried_.parts.reserve(metas.size());
  for (Pending* p : carried_.batch) {
    carried_.parts.push_back({p->sub.input, p->sub.output, p->sub.meta.num_elements()});
  }
  *out = {comm, carried_.parts, m.dtype, m.reduction};
  return true;
}

}  // namespace hora
