// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/allocated_outputs.h"

namespace hora {

Status RunWithAllocatedOutput(CollectiveBackend& data, const RequestMeta& m,
                              std::span<const int64_t> rows, int rank, int size, const void* input,
                              AllocatedOutput* out) {
  std::vector<int64_t> shape = m.shape.empty() ? std::vector<int64_t>{1} : m.shape;
  const size_t n = static_cast<size_t>(size);
  const size_t row_elements = m.row_elements();
  const size_t row_bytes = row_elements * DataTypeSize(m.dtype);
  switch (m.op) {
    case OpType::kAllgather: {
      std::vector<size_t> bytes(n);
      int64_t total = 0;
      for (size_t q = 0; q < n; ++q) {
        bytes[q] = static_cast<size_t>(rows[q]) * row_bytes;
        total += rows[q];
      }
      shape[0] = total;
      Tensor t = Tensor::Uninitialized(m.dtype, shape);
      HORA_RETURN_IF_ERROR(data.Allgatherv(input, t.data(), bytes));
      out->tensor = std::move(t);
      return Status::Ok();
    }
    case OpType::kReducescatter: {
      const size_t dim0 = static_cast<size_t>(shape[0]);
      auto rows_of = [&](size_t q) { return dim0 / n + (q < dim0 % n ? 1 : 0); };
      std::vector<size_t> counts(n);
      for (size_t q = 0; q < n; ++q) counts[q] = rows_of(q) * row_elements;
      shape[0] = static_cast<int64_t>(rows_of(static_cast<size_t>(rank)));
      Tensor t = Tensor::Uninitialized(m.dtype, shape);
      HORA_RETURN_IF_ERROR(data.Reducescatter(input, t.data(), counts, m.dtype, m.reduction));
      out->tensor = std::move(t);
      return Status::Ok();
    }
    case OpType::kAlltoall: {
      std::vector<size_t> send(n), recv(n);
      int64_t total = 0;
      out->received_splits.assign(n, 0);
      for (size_t q = 0; q < n; ++q) {
        send[q] = static_cast<size_t>(rows[static_cast<size_t>(rank) * n + q]) * row_bytes;
        const int64_t from_q = rows[q * n + static_cast<size_t>(rank)];
        out->received_splits[q] = from_q;
        recv[q] = static_cast<size_t>(from_q) * row_bytes;
        total += from_q;
      }
      shape[0] = total;
      Tensor t = Tensor::Uninitialized(m.dtype, shape);
      HORA_RETURN_IF_ERROR(data.Alltoallv(input, send, t.data(), recv));
      out->tensor = std::move(t);
      return Status::Ok();
    }
    default:
      return InternalError("not a shaped collective");
  }
}

}  // namespace hora
