// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/allocated_outputs.h"

namespace hora {

ShapedPlan PlanShaped(const RequestMeta& m, std::span<const int64_t> rows, int rank, int size) {
  ShapedPlan plan;
  plan.shape = m.shape.empty() ? std::vector<int64_t>{1} : m.shape;
  const size_t n = static_cast<size_t>(size);
  const size_t row_elements = m.row_elements();
  const size_t row_bytes = row_elements * DataTypeSize(m.dtype);
  switch (m.op) {
    case OpType::kAllgather: {
      plan.recv.resize(n);
      int64_t total = 0;
      for (size_t q = 0; q < n; ++q) {
        plan.recv[q] = static_cast<size_t>(rows[q]) * row_bytes;
        total += rows[q];
      }
      plan.shape[0] = total;
      break;
    }
    case OpType::kReducescatter: {
      const size_t dim0 = static_cast<size_t>(plan.shape[0]);
      auto rows_of = [&](size_t q) { return dim0 / n + (q < dim0 % n ? 1 : 0); };
      plan.counts.resize(n);
      for (size_t q = 0; q < n; ++q) plan.counts[q] = rows_of(q) * row_elements;
      plan.shape[0] = static_cast<int64_t>(rows_of(static_cast<size_t>(rank)));
      break;
    }
    case OpType::kAlltoall: {
      plan.send.resize(n);
      plan.recv.resize(n);
      plan.received_splits.assign(n, 0);
      int64_t total = 0;
      for (size_t q = 0; q < n; ++q) {
        plan.send[q] = static_cast<size_t>(rows[static_cast<size_t>(rank) * n + q]) * row_bytes;
        const int64_t from_q = rows[q * n + static_cast<size_t>(rank)];
        plan.received_splits[q] = from_q;
        plan.recv[q] = static_cast<size_t>(from_q) * row_bytes;
        total += from_q;
      }
      plan.shape[0] = total;
      plan.all.resize(n * n);
      for (size_t i = 0; i < n * n; ++i) plan.all[i] = static_cast<size_t>(rows[i]) * row_bytes;
      break;
    }
    default:
      break;
  }
  size_t elements = 1;
  for (int64_t d : plan.shape) elements *= static_cast<size_t>(d);
  plan.out_bytes = elements * DataTypeSize(m.dtype);
  return plan;
}

Status RunWithAllocatedOutput(CollectiveBackend& data, const RequestMeta& m,
                              std::span<const int64_t> rows, int rank, int size, const void* input,
                              OutputPool* outputs, AllocatedOutput* out) {
  if (m.op != OpType::kAllgather && m.op != OpType::kReducescatter && m.op != OpType::kAlltoall) {
    return InternalError("not a shaped collective");
  }
  ShapedPlan plan = PlanShaped(m, rows, rank, size);
  Tensor t =
      outputs ? outputs->Take(m.dtype, plan.shape) : Tensor::Uninitialized(m.dtype, plan.shape);
  switch (m.op) {
    case OpType::kAllgather:
      HORA_RETURN_IF_ERROR(data.Allgatherv(input, t.data(), plan.recv));
      break;
    case OpType::kReducescatter:
      HORA_RETURN_IF_ERROR(data.Reducescatter(input, t.data(), plan.counts, m.dtype, m.reduction));
      break;
    default:
      HORA_RETURN_IF_ERROR(data.AlltoallvAgreed(input, plan.send, t.data(), plan.recv, plan.all));
      out->received_splits = std::move(plan.received_splits);
      break;
  }
  out->tensor = std::move(t);
  return Status::Ok();
}

}  // namespace hora
