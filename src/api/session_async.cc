// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The Session's engine entry points: local checks, then Engine::Submit.
#include <functional>

#include "api/session_impl.h"

namespace hora {
std::string NameOrGenerated(Session::Impl& impl, const std::string& name, OpType op,
                            bool* cacheable) {
  *cacheable = !name.empty();
  if (!name.empty()) return name;
  std::lock_guard<std::mutex> lock(impl.engine_mu);
  return std::string(OpTypeName(op)) + ".noname." +
         std::to_string(impl.unnamed[static_cast<int>(op)]++);
}

std::string TimelinePathFor(const std::string& path, int rank) {
  const size_t at = path.find("{rank}");
  if (at != std::string::npos)
    return path.substr(0, at) + std::to_string(rank) + path.substr(at + 6);
  return rank == 0 ? path : "";
}

std::string Where(const Session::Impl& impl, OpType op, const std::string& name) {
  return impl.Where(OpTypeName(op)) + " '" + name + "'";
}

std::vector<Handle> SubmitGroup(
    Session::Impl& impl, const std::string& kind, const std::string& group, size_t count,
    const std::function<Status(size_t, const std::string&, bool, Submission*)>& prepare) {
  bool cacheable = true;
  std::string g = group;
  if (g.empty()) {
    std::lock_guard<std::mutex> lock(impl.engine_mu);
    g = kind + ".noname." + std::to_string(impl.unnamed_groups++);
    cacheable = false;
  }
  std::vector<Submission> members(count);
  Status st;
  for (size_t i = 0; st.ok() && i < count; ++i) {
    st = prepare(i, g + "." + std::to_string(i), cacheable, &members[i]);
    members[i].meta.group = g;
    members[i].meta.group_size = static_cast<uint32_t>(count);
  }
  if (!st.ok()) {
    std::vector<Handle> failed;
    for (size_t i = 0; i < count; ++i)
      failed.push_back(FailedHandle(g + "." + std::to_string(i), st));
    return failed;
  }
  if (members.empty()) return {};
  for (Submission& m : members) m.submitted = Clock::now();
  return impl.GetEngine().SubmitGroup(std::move(members));
}

namespace {

// Checks one allreduce and fills its submission; an error names the tensor.
Status PrepareAllreduce(const Session::Impl& impl, const std::string& n, bool cacheable,
                        const TensorView& input, const TensorView& output,
                        const Reduction& reduction, Submission* s) {
  const std::string where = Where(impl, OpType::kAllreduce, n);
  for (const auto* t : {&input, &output}) {
    Status st = t->Validate();
    if (!st.ok()) return st.WithContext(where);
  }
  if (input.dtype() != output.dtype() || input.num_elements() != output.num_elements()) {
    return InvalidArgument(where + ": output " + output.Describe() + " does not match input " +
                           input.Describe());
  }
  HORA_RETURN_IF_ERROR(CheckReduction(impl, "allreduce", input.dtype(), reduction));
  s->meta.name = n;
  s->meta.op = OpType::kAllreduce;
  s->meta.dtype = input.dtype();
  s->meta.shape = input.shape();
  s->meta.reduction = reduction;
  s->meta.device = input.device().type;
  s->meta.cacheable = cacheable;
  s->input = input;
  s->output = output;
  return Status::Ok();
}

}  // namespace

std::vector<Handle> Session::GroupedAllreduceAsync(const std::string& group,
                                                   std::span<const TensorView> inputs,
                                                   std::span<const TensorView> outputs,
                                                   const Reduction& reduction) {
  if (inputs.size() != outputs.size()) {
    const Status st = InvalidArgument(impl_->Where("grouped allreduce") + " '" + group +
                                      "': " + std::to_string(inputs.size()) + " inputs but " +
                                      std::to_string(outputs.size()) + " outputs");
    std::vector<Handle> failed;
    for (size_t i = 0; i < inputs.size(); ++i)
      failed.push_back(FailedHandle(group + "." + std::to_string(i), st));
    return failed;
  }
  return SubmitGroup(*impl_, "grouped_allreduce", group, inputs.size(),
                     [&](size_t i, const std::string& name, bool cacheable, Submission* s) {
                       return PrepareAllreduce(*impl_, name, cacheable, inputs[i], outputs[i],
                                               reduction, s);
                     });
}

Handle Session::AllreduceAsync(const std::string& name, const TensorView& input,
                               const TensorView& output, const Reduction& reduction) {
  bool cacheable = true;
  const std::string n = NameOrGenerated(*impl_, name, OpType::kAllreduce, &cacheable);
  Submission s;
  Status st = PrepareAllreduce(*impl_, n, cacheable, input, output, reduction, &s);
  if (!st.ok()) return FailedHandle(n, st);
  s.submitted = Clock::now();
  return impl_->GetEngine().Submit(std::move(s));
}

Handle Session::BroadcastAsync(const std::string& name, const TensorView& tensor, int root) {
  bool cacheable = true;
  const std::string n = NameOrGenerated(*impl_, name, OpType::kBroadcast, &cacheable);
  const std::string where = Where(*impl_, OpType::kBroadcast, n);
  Status st = tensor.Validate();
  if (!st.ok()) return FailedHandle(n, st.WithContext(where));
  if (root < 0 || root >= size()) {
    return FailedHandle(n, InvalidArgument(where + ": root rank " + std::to_string(root) +
                                           " is outside [0, " + std::to_string(size()) + ")"));
  }
  Submission s;
  s.meta.name = n;
  s.meta.op = OpType::kBroadcast;
  s.meta.dtype = tensor.dtype();
  s.meta.shape = tensor.shape();
  s.meta.root = root;
  s.meta.device = tensor.device().type;
  s.meta.cacheable = cacheable;
  s.input = tensor;
  s.output = tensor;
  s.submitted = Clock::now();
  return impl_->GetEngine().Submit(std::move(s));
}

Handle Session::BarrierAsync() {
  bool cacheable = true;
  Submission s;
  s.meta.name = NameOrGenerated(*impl_, "", OpType::kBarrier, &cacheable);
  s.meta.op = OpType::kBarrier;
  s.meta.dtype = DataType::kUInt8;
  s.meta.shape = {0};
  s.meta.cacheable = false;
  s.submitted = Clock::now();
  return impl_->GetEngine().Submit(std::move(s));
}

Handle Session::JoinAsync() {
  Submission s;
  s.meta.name = "join";
  s.meta.op = OpType::kJoin;
  s.meta.dtype = DataType::kUInt8;
  s.meta.shape = {0};
  s.meta.cacheable = false;
  s.submitted = Clock::now();
  return impl_->GetEngine().Submit(std::move(s));
}

Status Session::StartTimeline(const std::string& path) {
  const std::string mine = TimelinePathFor(path, rank());
  std::shared_ptr<Timeline> timeline;
  if (!mine.empty()) {
    HORA_ASSIGN_OR_RETURN(
        std::unique_ptr<Timeline> t,
        Timeline::Open(mine, rank(),
                       static_cast<uint64_t>(impl_->config.timeline_max_mb * 1024 * 1024)));
    timeline = std::move(t);
  }
  std::lock_guard<std::mutex> lock(impl_->engine_mu);
  impl_->timeline = timeline;
  if (impl_->engine) impl_->engine->SetTimeline(timeline);
  return Status::Ok();
}

Status Session::StopTimeline() {
  std::shared_ptr<Timeline> old;
  {
    std::lock_guard<std::mutex> lock(impl_->engine_mu);
    old = std::move(impl_->timeline);
    if (impl_->engine) impl_->engine->SetTimeline(nullptr);
  }
  return Status::Ok();  // `old` closes the file once the engine lets go of it
}

Session::EngineCounters Session::engine_counters() const {
  std::lock_guard<std::mutex> lock(impl_->engine_mu);
  if (!impl_->engine) return {};
  const EngineStats e = impl_->engine->stats();
  return {e.cycles,       e.slow_cycles,     e.coordinator_bytes,   e.cache_hits,
          e.cache_misses, e.cache_evictions, e.cache_invalidations, e.tensors,
          e.fused_batches};
}

}  // namespace hora
