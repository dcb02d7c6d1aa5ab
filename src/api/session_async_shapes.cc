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
  s.input = input;
  return s;
}

Status PrepareAllgather(const Session::Impl& impl, const std::string& name, bool cacheable,
                        const TensorView& input, Submission* s) {
  Status st = input.Validate();
  if (!st.ok()) return st.WithContext(Where(impl, OpType::kAllgather, name));
  *s = Shaped(OpType::kAllgather, name, cacheable, input);
  return Status::Ok();
}

Status PrepareReducescatter(const Session::Impl& impl, const std::string& name, bool cacheable,
                            const TensorView& input, const Reduction& reduction, Submission* s) {
  Status st = input.Validate();
  if (!st.ok()) return st.WithContext(Where(impl, OpType::kReducescatter, name));
  HORA_RETURN_IF_ERROR(CheckReduction(impl, "reducescatter", input.dtype(), reduction));
  *s = Shaped(OpType::kReducescatter, name, cacheable, input);
  s->meta.reduction = reduction;
  return Status::Ok();
}

Handle Submit(Session::Impl& impl, const std::string& name, Status st, Submission s) {
  if (!st.ok()) return FailedHandle(name, st);
  s.submitted = Clock::now();
  return impl.GetEngine().Submit(std::move(s));
}

}  // namespace

Handle Session::AllgatherAsync(const std::string& name, const TensorView& input) {
  bool cacheable = true;
  const std::string n = NameOrGenerated(*impl_, name, OpType::kAllgather, &cacheable);
  Submission s;
  Status st = PrepareAllgather(*impl_, n, cacheable, input, &s);
  return Submit(*impl_, n, st, std::move(s));
}

Handle Session::ReducescatterAsync(const std::string& name, const TensorView& input,
                                   const Reduction& reduction) {
  bool cacheable = true;
  const std::string n = NameOrGenerated(*impl_, name, OpType::kReducescatter, &cacheable);
  Submission s;
  Status st = PrepareReducescatter(*impl_, n, cacheable, input, reduction, &s);
  return Submit(*impl_, n, st, std::move(s));
}

Handle Session::AlltoallAsync(const std::string& name, const TensorView& input,
                              std::span<const int64_t> splits) {
  bool cacheable = true;
  const std::string n = NameOrGenerated(*impl_, name, OpType::kAlltoall, &cacheable);
  const std::string where = Where(*impl_, OpType::kAlltoall, n);
  Status st = input.Validate();
  if (!st.ok()) return FailedHandle(n, st.WithContext(where));
  std::vector<int64_t> rows;
  st = AlltoallRows(where, input, splits, static_cast<size_t>(size()), &rows);
  Submission s = Shaped(OpType::kAlltoall, n, cacheable, input);
  s.meta.splits = std::move(rows);
  return Submit(*impl_, n, st, std::move(s));
}

std::vector<Handle> Session::GroupedAllgatherAsync(const std::string& group,
                                                   std::span<const TensorView> inputs) {
  return SubmitGroup(*impl_, "grouped_allgather", group, inputs.size(),
                     [&](size_t i, const std::string& name, bool cacheable, Submission* s) {
                       return PrepareAllgather(*impl_, name, cacheable, inputs[i], s);
                     });
}

std::vector<Handle> Session::GroupedReducescatterAsync(const std::string& group,
                                                       std::span<const TensorView> inputs,
                                                       const Reduction& reduction) {
  return SubmitGroup(*impl_, "grouped_reducescatter", group, inputs.size(),
                     [&](size_t i, const std::string& name, bool cacheable, Submission* s) {
                       return PrepareReducescatter(*impl_, name, cacheable, inputs[i], reduction,
                                                   s);
                     });
}

}  // namespace hora
