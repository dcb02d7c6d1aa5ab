// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Engine entry points of the collectives whose output Hora allocates
// (allgather, reducescatter, alltoall): local checks, then Engine::Submit.
// The coordinator agrees the shapes (every rank's dimension 0, every rank's
// splits) and the engine allocates the output, handed back by
// Handle::output().
#include "api/session_impl.h"

namespace hora {
namespace {

Submission Shaped(OpType op, const std::string& name, bool cacheable, const TensorView& input) {
  Submission s;
  s.meta.name = name;
  s.meta.op = op;
  s.meta.dtype = input.dtype();
  s.meta.shape = input.shape().empty() ? std::vector<int64_t>{1} : input.shape();
  s.meta.device = input.device().type;
  s.meta.cacheable = cacheable;
  s.input = input.data();
  return s;
}

Status PrepareAllgather(const Session::Impl& impl, const std::string& name, bool cacheable,
                        const TensorView& input, Submission* s) {
  const std::string where = Where(impl, OpType::kAllgather, name);
  Status st = input.Validate();
  if (!st.ok()) return st.WithContext(where);
  HORA_RETURN_IF_ERROR(CheckDeviceMemory(
      impl, [&] { return where; }, input));
  *s = Shaped(OpType::kAllgather, name, cacheable, input);
  return Status::Ok();
}

Status PrepareReducescatter(const Session::Impl& impl, const std::string& name, bool cacheable,
                            const TensorView& input, const Reduction& reduction, Submission* s) {
  const std::string where = Where(impl, OpType::kReducescatter, name);
  Status st = input.Validate();
  if (!st.ok()) return st.WithContext(where);
  HORA_RETURN_IF_ERROR(CheckDeviceMemory(
      impl, [&] { return where; }, input));
  HORA_RETURN_IF_ERROR(CheckReduction(impl, "reducescatter", input.dtype(), reduction, &name));
  *s = Shaped(OpType::kReducescatter, name, cacheable, input);
  s->meta.reduction = reduction;
  return Status::Ok();
}

}  // namespace

Handle Session::AllgatherAsync(const std::string& name, const TensorView& input, int process_set) {
  const EngineCall call = BeginEngineCall(*impl_, process_set, name, OpType::kAllgather);
  Submission s;
  Status st = call.status;
  if (st.ok()) st = PrepareAllgather(*impl_, call.name(), true, input, &s);
  return call.Submit(st, std::move(s));
}

Handle Session::ReducescatterAsync(const std::string& name, const TensorView& input,
                                   const Reduction& reduction, int process_set) {
  const EngineCall call = BeginEngineCall(*impl_, process_set, name, OpType::kReducescatter);
  Submission s;
  Status st = call.status;
  if (st.ok()) st = PrepareReducescatter(*impl_, call.name(), true, input, reduction, &s);
  return call.Submit(st, std::move(s));
}

Handle Session::AlltoallAsync(const std::string& name, const TensorView& input,
                              std::span<const int64_t> splits, int process_set) {
  const EngineCall call = BeginEngineCall(*impl_, process_set, name, OpType::kAlltoall);
  if (!call.status.ok()) return call.Submit(call.status, {});
  const std::string where = Where(*impl_, OpType::kAlltoall, call.name());
  Status st = input.Validate();
  if (!st.ok()) return call.Submit(st.WithContext(where), {});
  st = CheckDeviceMemory(
      *impl_, [&] { return where; }, input);
  if (!st.ok()) return call.Submit(st, {});
  std::vector<int64_t> rows;
  st = AlltoallRows(where, input, splits, call.set->ranks.size(), &rows);
  Submission s = Shaped(OpType::kAlltoall, call.name(), true, input);
  s.meta.splits = std::move(rows);
  return call.Submit(st, std::move(s));
}

std::vector<Handle> Session::GroupedAllgatherAsync(const std::string& group,
                                                   std::span<const TensorView> inputs,
                                                   int process_set) {
  return SubmitGroup(*impl_, process_set, OpType::kAllgather, "grouped_allgather", group,
                     inputs.size(),
                     [&](size_t i, const std::string& name, bool cacheable, Submission* s) {
                       return PrepareAllgather(*impl_, name, cacheable, inputs[i], s);
                     });
}

std::vector<Handle> Session::GroupedReducescatterAsync(const std::string& group,
                                                       std::span<const TensorView> inputs,
                                                       const Reduction& reduction,
                                                       int process_set) {
  return SubmitGroup(
      *impl_, process_set, OpType::kReducescatter, "grouped_reducescatter", group, inputs.size(),
      [&](size_t i, const std::string& name, bool cacheable, Submission* s) {
        return PrepareReducescatter(*impl_, name, cacheable, inputs[i], reduction, s);
      });
}

}  // namespace hora
