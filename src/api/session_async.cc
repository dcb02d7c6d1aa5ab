// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The Session's engine entry points: local checks, then Engine::Submit.
#include <algorithm>
#include <functional>
#include <iterator>

#include "api/session_impl.h"

namespace hora {

std::string TimelinePathFor(const std::string& path, int rank) {
  const size_t at = path.find("{rank}");
  if (at != std::string::npos)
    return path.substr(0, at) + std::to_string(rank) + path.substr(at + 6);
  return rank == 0 ? path : "";
}

std::string Where(const Session::Impl& impl, OpType op, const std::string& name) {
  return impl.Where(OpTypeName(op)) + " '" + name + "'";
}

Submission RefusalOf(OpType op, const Status& error, const std::string* name, bool cacheable,
                     const RequestMeta& group_of) {
  // (A refusal matches no cached entry, and a failed decision is never
  // cached: `cacheable` only says whether its name was the caller's.)
  Submission r;
  r.name_of = name;
  r.meta.op = op;
  r.meta.cacheable = cacheable;
  r.meta.group = group_of.group;
  r.meta.group_size = group_of.group_size;
  r.meta.refused = error.message();
  r.meta.refused_code = error.code();
  return r;
}

Handle EngineCall::Submit(Status st, Submission&& s) const {
  if (!status.ok()) return FailedHandle(name(), status);
  if (!st.ok()) return GetEngine().Submit(RefusalOf(op, st, &name(), cacheable, s.meta));
  // (Where the caller's checks filled it in, it is this name already.)
  if (s.meta.name.empty() && s.name_of == nullptr) s.name_of = &name();
  s.meta.cacheable = s.meta.cacheable && cacheable;
  return GetEngine().Submit(std::move(s));
}

std::vector<Handle> SubmitGroup(
    Session::Impl& impl, int set_id, OpType op, const std::string& kind, const std::string& group,
    size_t count,
    const std::function<Status(size_t, const std::string&, bool, Submission*)>& prepare) {
  EngineCall call = BeginEngineCall(impl, set_id, group.empty() ? kind : group, op);
  std::string g = group;
  if (g.empty() && call.set) {  // "<kind>.noname.<N>", N counted per set
    MutexLock lock(impl.engine_mu);
    g = kind + ".noname." + std::to_string(call.set->unnamed_groups++);
    call.cacheable = false;
  }
  std::vector<Submission> members(count);
  std::vector<std::string> names(count);  // (the members' names: until the engine took them)
  Status st = call.status;
  for (size_t i = 0; st.ok() && i < count; ++i) {
    names[i] = g + "." + std::to_string(i);
    st = prepare(i, names[i], call.cacheable, &members[i]);
    members[i].meta.group = g;
    members[i].meta.group_size = static_cast<uint32_t>(count);
  }
  if (!st.ok() && !call.status.ok()) {
    std::vector<Handle> failed;
    for (size_t i = 0; i < count; ++i)
      failed.push_back(FailedHandle(g + "." + std::to_string(i), st));
    return failed;
  }
  if (!st.ok()) {  // every member refused (see EngineCall::Submit)
    RequestMeta group_of;
    group_of.group = g;
    group_of.group_size = static_cast<uint32_t>(count);
    for (size_t i = 0; i < count; ++i) {
      names[i] = g + "." + std::to_string(i);
      members[i] = RefusalOf(call.op, st, &names[i], call.cacheable, group_of);
    }
  }
  if (members.empty()) return {};
  return call.GetEngine().SubmitGroup(std::move(members));
}

namespace {

// Checks one allreduce and fills its submission; an error names the tensor.
Status PrepareAllreduce(const Session::Impl& impl, const std::string& n, bool cacheable,
                        const TensorView& input, const TensorView& output,
                        const Reduction& reduction, Submission* s) {
  // Formatted only on failure: a step may submit hundreds of these.
  auto where = [&] { return Where(impl, OpType::kAllreduce, n); };
  Status valid = input.Validate();
  if (valid.ok() && &output != &input) valid = output.Validate();  // (in place: one view)
  if (!valid.ok()) return valid.WithContext(where());
  if (input.dtype() != output.dtype() || input.num_elements() != output.num_elements()) {
    return InvalidArgument(where() + ": output " + output.Describe() + " does not match input " +
                           input.Describe());
  }
  HORA_RETURN_IF_ERROR(CheckReduction(impl, "allreduce", input.dtype(), reduction, &n));
  if (input.device().type != DeviceType::kCPU || output.device().type != DeviceType::kCPU) {
    if (!(input.device() == output.device())) {
      return InvalidArgument(where() + ": output " + output.Describe() +
                             " is not on the device of input " + input.Describe());
    }
    HORA_RETURN_IF_ERROR(CheckDeviceMemory(impl, where, input));
    if (output.data() != input.data()) {
      HORA_RETURN_IF_ERROR(CheckDeviceMemory(
          impl, [&] { return where() + " output"; }, output));
    }
  }
  s->name_of = &n;  // (n outlives the Submit call, which copies it)
  s->meta.op = OpType::kAllreduce;
  s->meta.dtype = input.dtype();
  s->shape_of = &input.shape();  // (input outlives the Submit call, which copies it)
  s->meta.reduction = reduction;
  s->meta.device = input.device().type;
  s->meta.cacheable = cacheable;
  s->input = input.data();
  s->output = output.data();
  return Status::Ok();
}

}  // namespace

std::vector<Handle> Session::GroupedAllreduceAsync(const std::string& group,
                                                   std::span<const TensorView> inputs,
                                                   std::span<const TensorView> outputs,
                                                   const Reduction& reduction, int process_set) {
  if (inputs.size() != outputs.size()) {  // (refused on every member: SubmitGroup)
    return SubmitGroup(*impl_, process_set, OpType::kAllreduce, "grouped_allreduce", group,
                       std::max(inputs.size(), outputs.size()),
                       [&](size_t, const std::string& member, bool, Submission*) {
                         // (The group's name: the caller's, or the one made for it.)
                         const std::string g = member.substr(0, member.rfind('.'));
                         return InvalidArgument(impl_->Where("grouped allreduce") + " '" + g +
                                                "': " + std::to_string(inputs.size()) +
                                                " inputs but " + std::to_string(outputs.size()) +
                                                " outputs");
                       });
  }
  return SubmitGroup(
      *impl_, process_set, OpType::kAllreduce, "grouped_allreduce", group, inputs.size(),
      [&](size_t i, const std::string& name, bool cacheable, Submission* s) {
        return PrepareAllreduce(*impl_, name, cacheable, inputs[i], outputs[i], reduction, s);
      });
}

Handle Session::AllreduceAsync(const std::string& name, const TensorView& input,
                               const TensorView& output, const Reduction& reduction,
                               int process_set) {
  const EngineCall call = BeginEngineCall(*impl_, process_set, name, OpType::kAllreduce);
  Submission s;
  Status st = call.status;
  if (st.ok()) st = PrepareAllreduce(*impl_, call.name(), true, input, output, reduction, &s);
  return call.Submit(st, std::move(s));
}

Handle Session::BroadcastAsync(const std::string& name, const TensorView& tensor, int root,
                               int process_set) {
  const EngineCall call = BeginEngineCall(*impl_, process_set, name, OpType::kBroadcast);
  if (!call.status.ok()) return call.Submit(call.status, {});
  auto where = [&] { return Where(*impl_, OpType::kBroadcast, call.name()); };  // (on failure)
  Status st = tensor.Validate();
  if (!st.ok()) return call.Submit(st.WithContext(where()), {});
  st = CheckDeviceMemory(*impl_, where, tensor);
  if (!st.ok()) return call.Submit(st, {});
  // `root` is a session rank (as in Horovod); the engine works in set ranks.
  const int set_root = call.set->SetRank(root);
  if (set_root < 0) {
    const std::string in = call.set->id == 0 ? "is outside [0, " + std::to_string(size()) + ")"
                                             : "is not in " + call.set->Label();
    return call.Submit(InvalidArgument(where() + ": root rank " + std::to_string(root) + " " + in),
                       {});
  }
  Submission s;
  s.meta.op = OpType::kBroadcast;
  s.meta.dtype = tensor.dtype();
  s.shape_of = &tensor.shape();  // (as PrepareAllreduce)
  s.meta.root = set_root;
  s.meta.device = tensor.device().type;
  s.meta.cacheable = true;
  s.input = tensor.data();
  s.output = tensor.data();
  return call.Submit(Status::Ok(), std::move(s));
}

std::vector<Handle> Session::RefuseAsync(std::string_view collective, const std::string& name,
                                         const Status& error, size_t group_size, int process_set) {
  struct Kind {
    std::string_view name;
    OpType op;
    bool grouped;
  };
  static constexpr Kind kKinds[] = {
      {"allreduce", OpType::kAllreduce, false},
      {"broadcast", OpType::kBroadcast, false},
      {"allgather", OpType::kAllgather, false},
      {"reducescatter", OpType::kReducescatter, false},
      {"alltoall", OpType::kAlltoall, false},
      {"grouped_allreduce", OpType::kAllreduce, true},
      {"grouped_allgather", OpType::kAllgather, true},
      {"grouped_reducescatter", OpType::kReducescatter, true},
  };
  const Kind* kind = nullptr;
  for (const Kind& k : kKinds) {
    if (k.name == collective) kind = &k;
  }
  if (kind == nullptr || error.ok()) {
    const std::string what = kind == nullptr
                                 ? "no collective is called '" + std::string(collective) + "'"
                                 : "a refusal needs an error";
    return {
        FailedHandle(name, InvalidArgument(impl_->Where("refusal") + " '" + name + "': " + what))};
  }
  // (The others quote the message: it says which rank refused.)
  const Status refused(error.code(), "rank " + std::to_string(rank()) + ": " + error.message());
  if (kind->grouped) {
    return SubmitGroup(*impl_, process_set, kind->op, std::string(kind->name), name, group_size,
                       [&](size_t, const std::string&, bool, Submission*) { return refused; });
  }
  const EngineCall call = BeginEngineCall(*impl_, process_set, name, kind->op);
  return {call.Submit(refused, {})};
}

Handle Session::BarrierAsync(int process_set) {
  const std::string unnamed;
  EngineCall call = BeginEngineCall(*impl_, process_set, unnamed, OpType::kBarrier);
  Submission s;
  s.meta.op = OpType::kBarrier;
  s.meta.dtype = DataType::kUInt8;
  s.meta.shape = {0};
  s.meta.cacheable = false;
  return call.Submit(Status::Ok(), std::move(s));
}

Handle Session::JoinAsync() {
  const std::string join = "join";
  EngineCall call = BeginEngineCall(*impl_, 0, join, OpType::kJoin);
  if (call.set) {
    // Unnamed calls are numbered per rank, and a joined rank makes none of
    // the others' (a non-allreduce fails on them): each join starts every
    // count again, so that they agree once every rank has joined.
    MutexLock lock(impl_->engine_mu);
    std::fill(std::begin(call.set->unnamed), std::end(call.set->unnamed), 0);
    call.set->unnamed_groups = 0;
  }
  Submission s;
  s.meta.op = OpType::kJoin;
  s.meta.dtype = DataType::kUInt8;
  s.meta.shape = {0};
  s.meta.cacheable = false;
  return call.Submit(Status::Ok(), std::move(s));
}

Status Session::StartTimeline(const std::string& path) {
  HORA_RETURN_IF_ERROR(ForkedChildError(*impl_, "start_timeline"));
  const std::string mine = TimelinePathFor(path, rank());
  std::shared_ptr<Timeline> timeline;
  if (!mine.empty()) {
    HORA_ASSIGN_OR_RETURN(
        std::unique_ptr<Timeline> t,
        Timeline::Open(mine, rank(),
                       static_cast<uint64_t>(impl_->config.timeline_max_mb * 1024 * 1024),
                       impl_->logger));
    timeline = std::move(t);
  }
  MutexLock lock(impl_->engine_mu);
  impl_->timeline = timeline;
  for (auto& [id, set] : impl_->sets) {
    if (set->engine) set->engine->SetTimeline(timeline);
  }
  return Status::Ok();
}

Status Session::StopTimeline() {
  HORA_RETURN_IF_ERROR(ForkedChildError(*impl_, "stop_timeline"));
  std::shared_ptr<Timeline> old;
  {
    MutexLock lock(impl_->engine_mu);
    old = std::move(impl_->timeline);
    for (auto& [id, set] : impl_->sets) {
      if (set->engine) set->engine->SetTimeline(nullptr);
    }
  }
  return Status::Ok();  // `old` closes the file once the engines let go of it
}

Session::EngineCounters Session::engine_counters(int process_set) const {
  MutexLock lock(impl_->engine_mu);
  auto it = impl_->sets.find(process_set);
  if (it == impl_->sets.end() || !it->second->engine) return {};
  const EngineStats e = it->second->engine->stats();
  EngineCounters c;
  c.cycles = e.cycles;
  c.slow_cycles = e.slow_cycles;
  c.coordinator_bytes = e.coordinator_bytes;
  c.cache_hits = e.cache_hits;
  c.cache_misses = e.cache_misses;
  c.cache_evictions = e.cache_evictions;
  c.cache_invalidations = e.cache_invalidations;
  c.tensors = e.tensors;
  c.fused_batches = e.fused_batches;
  c.driven_cycles = e.driven_cycles;
  c.name_records = e.name_records;
  c.carried_batches = e.carried_batches;
  c.idle_wakeups = e.idle_wakeups;
  c.settings_taken = e.settings_taken;
  c.gpu_route_batches = e.gpu_route_batches;
  const auto route = [&](const char* name) {
    const auto r = e.gpu_route_batches.find(name);
    return r == e.gpu_route_batches.end() ? uint64_t{0} : r->second;
  };
  c.window_batches = route("window");
  c.nccl_batches = route("nccl");
  c.one_rank_batches = route("one_rank");
  const OutputPool::Stats pool = impl_->output_pool->stats();
  c.outputs_reused = pool.reused;
  c.outputs_fresh = pool.fresh;
  return c;
}

}  // namespace hora
