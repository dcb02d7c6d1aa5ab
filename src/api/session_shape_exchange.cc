// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The collectives whose output shape depends on other ranks' inputs:
// allgather, reducescatter, alltoall. Each first exchanges the small facts
// it needs (shapes, splits), checks them, then moves the data into the
// caller's output or, for the forms that return a Tensor, a new one.
#include <algorithm>
#include <numeric>

#include "api/session_impl.h"

namespace hora {
namespace {

std::vector<int64_t> Shape(const TensorView& t) {
  return t.shape().empty() ? std::vector<int64_t>{1} : t.shape();  // a scalar gathers as [1]
}

std::string ShapeString(DataType dtype, const int64_t* dims, size_t ndim) {
  std::string s = std::string(DataTypeName(dtype)) + "[";
  for (size_t i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// Gathers (dtype, shape) of every one of the n ranks and checks that all agree except in
// dimension 0. Returns every rank's dimension 0.
Result<std::vector<int64_t>> GatherRows(CollectiveBackend& backend, size_t n,
                                        const std::string& where, const TensorView& t) {
  const std::vector<int64_t> shape = Shape(t);
  int64_t head[2] = {static_cast<int64_t>(t.dtype()), static_cast<int64_t>(shape.size())};
  std::vector<int64_t> heads(2 * n);
  std::vector<size_t> head_bytes(n, sizeof head);
  HORA_RETURN_IF_ERROR(backend.Allgatherv(head, heads.data(), head_bytes));
  for (size_t p = 0; p < n; ++p) {
    if (heads[2 * p] != heads[0] || heads[2 * p + 1] != heads[1]) {
      std::string msg = where + ": ranks disagree on dtype or number of dimensions:";
      for (size_t q = 0; q < n; ++q) {
        msg += " rank " + std::to_string(q) + " " +
               DataTypeName(static_cast<DataType>(heads[2 * q])) + " with " +
               std::to_string(heads[2 * q + 1]) + " dims" + (q + 1 < n ? ";" : "");
      }
      return MismatchError(msg);
    }
  }
  const size_t ndim = shape.size();
  std::vector<int64_t> dims(ndim * n);
  std::vector<size_t> dim_bytes(n, ndim * sizeof(int64_t));
  HORA_RETURN_IF_ERROR(backend.Allgatherv(shape.data(), dims.data(), dim_bytes));
  std::vector<int64_t> rows(n);
  for (size_t p = 0; p < n; ++p) {
    rows[p] = dims[p * ndim];
    for (size_t d = 1; d < ndim; ++d) {
      if (dims[p * ndim + d] != dims[d]) {
        std::string msg = where + ": ranks disagree on the shape beyond dimension 0:";
        for (size_t q = 0; q < n; ++q) {
          msg += " rank " + std::to_string(q) + " " +
                 ShapeString(t.dtype(), &dims[q * ndim], ndim) + (q + 1 < n ? ";" : "");
        }
        return MismatchError(msg);
      }
    }
  }
  return rows;
}

// Gathers every rank's alltoall splits (`mine`, rows to each rank) with its
// dtype and elements a row, and checks that all agree on those. Returns the
// rows every rank sends each, rank-major (n rows of n).
Result<std::vector<int64_t>> GatherSplits(CollectiveBackend& backend, size_t n,
                                          const std::string& where, const TensorView& t,
                                          const std::vector<int64_t>& mine) {
  const size_t width = n + 2;
  std::vector<int64_t> row(mine.begin(), mine.end());
  row.push_back(static_cast<int64_t>(t.dtype()));
  row.push_back(static_cast<int64_t>(t.row_elements()));
  std::vector<int64_t> rows(width * n);
  const std::vector<size_t> each(n, width * sizeof(int64_t));
  HORA_RETURN_IF_ERROR(backend.Allgatherv(row.data(), rows.data(), each));
  for (size_t p = 0; p < n; ++p) {
    if (rows[p * width + n] != row[n] || rows[p * width + n + 1] != row[n + 1]) {
      std::string msg = where + ": ranks disagree on the rows they exchange:";
      for (size_t q = 0; q < n; ++q) {
        msg += " rank " + std::to_string(q) + " " +
               DataTypeName(static_cast<DataType>(rows[q * width + n])) + " rows of " +
               std::to_string(rows[q * width + n + 1]) + " elements" + (q + 1 < n ? ";" : "");
      }
      return MismatchError(msg);
    }
  }
  std::vector<int64_t> all(n * n);
  for (size_t p = 0; p < n; ++p) {
    std::copy_n(rows.begin() + static_cast<std::ptrdiff_t>(p * width), n,
                all.begin() + static_cast<std::ptrdiff_t>(p * n));
  }
  return all;
}

// Where a collective's result goes. With a caller's `output` that fits
// (`dtype` and the element count of `shape`, not overlapping `input`), there;
// without one, a new Tensor of `shape` (*made). An output that does not fit is
// not written: this rank still takes part, into a temporary, so that the
// other ranks finish with their results, and it alone returns the error
// `*misfit`.
void* PlaceOutput(const Session::Impl& impl, const char* op, const TensorView& input,
                  const TensorView* output, const std::vector<int64_t>& shape, Tensor* made,
                  Status* misfit) {
  if (output != nullptr) {
    const TensorView want(nullptr, input.dtype(), shape);
    Status st = CheckTensor(impl, op, "output", *output);
    if (st.ok() && output->device().type != DeviceType::kCPU) {
      st = InvalidArgument(impl.Where(op) + ": output " + output->Describe() +
                           " is not in host memory, as input " + input.Describe() +
                           " is: a host tensor's result goes in host memory");
    }
    if (st.ok() &&
        (output->dtype() != input.dtype() || output->num_elements() != want.num_elements())) {
      st = InvalidArgument(impl.Where(op) + ": output " + output->Describe() +
                           " does not fit the result " + want.Describe() +
                           " (dtype and element count must match)");
    }
    const auto* in = static_cast<const std::byte*>(input.data());
    const auto* out = static_cast<const std::byte*>(output->data());
    if (st.ok() && input.num_bytes() > 0 && output->num_bytes() > 0 &&
        in < out + output->num_bytes() && out < in + input.num_bytes()) {
      st = InvalidArgument(impl.Where(op) + ": output " + output->Describe() + " overlaps input " +
                           input.Describe() + "; " + op + " does not run in place");
    }
    if (st.ok()) return output->data();
    *misfit = st;
  }
  *made = impl.output_pool->Take(input.dtype(), shape);
  return made->data();
}

}  // namespace

Status AlltoallRows(const std::string& where, const TensorView& input,
                    std::span<const int64_t> splits, size_t n, std::vector<int64_t>* rows) {
  const int64_t dim0 = input.shape().empty() ? 1 : input.shape()[0];
  rows->assign(n, 0);
  if (splits.empty()) {
    if (dim0 % static_cast<int64_t>(n) != 0) {
      return InvalidArgument(where + ": dimension 0 (" + std::to_string(dim0) +
                             ") does not divide by the " + std::to_string(n) +
                             " ranks; pass splits");
    }
    std::fill(rows->begin(), rows->end(), dim0 / static_cast<int64_t>(n));
    return Status::Ok();
  }
  if (splits.size() != n) {
    return InvalidArgument(where + ": " + std::to_string(splits.size()) + " splits given for " +
                           std::to_string(n) + " ranks");
  }
  int64_t sum = 0;
  for (size_t p = 0; p < n; ++p) {
    if (splits[p] < 0) {
      return InvalidArgument(where + ": split for rank " + std::to_string(p) + " is negative (" +
                             std::to_string(splits[p]) + ")");
    }
    sum += splits[p];
    (*rows)[p] = splits[p];
  }
  if (sum != dim0) {
    return InvalidArgument(where + ": splits add up to " + std::to_string(sum) +
                           " rows but dimension 0 of " + input.Describe() + " is " +
                           std::to_string(dim0));
  }
  return Status::Ok();
}

namespace {

Status AllgatherTo(Session::Impl& impl, int n, const TensorView& input, const TensorView* output,
                   Tensor* made) {
  HORA_RETURN_IF_ERROR(ForkedChildError(impl, "allgather"));
  const std::string where = impl.Where("allgather");
  HORA_RETURN_IF_ERROR(CheckTensor(impl, "allgather", "input", input));
  HORA_ASSIGN_OR_RETURN(std::vector<int64_t> rows,
                        GatherRows(*impl.backend, static_cast<size_t>(n), where, input));
  std::vector<int64_t> out_shape = Shape(input);
  out_shape[0] = std::accumulate(rows.begin(), rows.end(), int64_t{0});
  Status misfit;
  void* out = PlaceOutput(impl, "allgather", input, output, out_shape, made, &misfit);
  const size_t row_bytes = input.row_elements() * DataTypeSize(input.dtype());
  std::vector<size_t> bytes(rows.size());
  for (size_t p = 0; p < rows.size(); ++p) bytes[p] = static_cast<size_t>(rows[p]) * row_bytes;
  HORA_RETURN_IF_ERROR(impl.backend->Allgatherv(input.data(), out, bytes));
  return misfit;
}

Status ReducescatterTo(Session::Impl& impl, int n_ranks, int rank, const TensorView& input,
                       const TensorView* output, const Reduction& reduction, Tensor* made) {
  HORA_RETURN_IF_ERROR(ForkedChildError(impl, "reducescatter"));
  HORA_RETURN_IF_ERROR(CheckTensor(impl, "reducescatter", "input", input));
  HORA_RETURN_IF_ERROR(CheckReduction(impl, "reducescatter", input.dtype(), reduction));
  const std::vector<int64_t> shape = Shape(input);
  const size_t n = static_cast<size_t>(n_ranks);
  const size_t dim0 = static_cast<size_t>(shape[0]);
  const size_t row = input.row_elements();
  auto rows_of = [&](size_t p) { return dim0 / n + (p < dim0 % n ? 1 : 0); };
  std::vector<size_t> counts(n);
  for (size_t p = 0; p < n; ++p) counts[p] = rows_of(p) * row;
  std::vector<int64_t> out_shape = shape;
  out_shape[0] = static_cast<int64_t>(rows_of(static_cast<size_t>(rank)));
  Status misfit;
  void* out = PlaceOutput(impl, "reducescatter", input, output, out_shape, made, &misfit);
  HORA_RETURN_IF_ERROR(
      impl.backend->Reducescatter(input.data(), out, counts, input.dtype(), reduction));
  return misfit;
}

Status AlltoallTo(Session::Impl& impl, int n_ranks, const TensorView& input,
                  std::span<const int64_t> splits, const TensorView* output,
                  std::vector<int64_t>* received_splits, Tensor* made) {
  HORA_RETURN_IF_ERROR(ForkedChildError(impl, "alltoall"));
  const std::string where = impl.Where("alltoall");
  HORA_RETURN_IF_ERROR(CheckTensor(impl, "alltoall", "input", input));
  const std::vector<int64_t> shape = Shape(input);
  const size_t n = static_cast<size_t>(n_ranks);
  std::vector<int64_t> send_rows;
  HORA_RETURN_IF_ERROR(AlltoallRows(where, input, splits, n, &send_rows));
  const size_t row_bytes = input.row_elements() * DataTypeSize(input.dtype());
  const auto me = static_cast<size_t>(impl.comm.rank());
  std::vector<size_t> send_bytes(n), recv_bytes(n), all_bytes;
  std::vector<int64_t> recv_rows(n);
  const bool agreed = impl.backend->WantsAlltoallSplits();
  if (agreed) {
    // Every rank's splits to every rank, with its row's dtype and elements
    // (which must agree: the backend chooses its algorithm by the splits'
    // bytes, alike on every rank).
    HORA_ASSIGN_OR_RETURN(const std::vector<int64_t> all_rows,
                          GatherSplits(*impl.backend, n, where, input, send_rows));
    all_bytes.resize(n * n);
    for (size_t i = 0; i < n * n; ++i) all_bytes[i] = static_cast<size_t>(all_rows[i]) * row_bytes;
    for (size_t p = 0; p < n; ++p) recv_rows[p] = all_rows[p * n + me];
  } else {
    // Tell every rank how many rows to expect from us.
    std::vector<size_t> eight(n, sizeof(int64_t));
    HORA_RETURN_IF_ERROR(impl.backend->Alltoallv(send_rows.data(), eight, recv_rows.data(), eight));
  }
  int64_t total = 0;
  for (size_t p = 0; p < n; ++p) {
    send_bytes[p] = static_cast<size_t>(send_rows[p]) * row_bytes;
    recv_bytes[p] = static_cast<size_t>(recv_rows[p]) * row_bytes;
    total += recv_rows[p];
  }
  std::vector<int64_t> out_shape = shape;
  out_shape[0] = total;
  Status misfit;
  void* out = PlaceOutput(impl, "alltoall", input, output, out_shape, made, &misfit);
  HORA_RETURN_IF_ERROR(
      agreed ? impl.backend->AlltoallvAgreed(input.data(), send_bytes, out, recv_bytes, all_bytes)
             : impl.backend->Alltoallv(input.data(), send_bytes, out, recv_bytes));
  if (received_splits != nullptr) *received_splits = recv_rows;
  return misfit;
}

}  // namespace

Result<Tensor> Session::Allgather(const TensorView& input) {
  if (OnGpu(input)) return WaitForOutput(AllgatherAsync("", input));
  Tensor out;
  HORA_RETURN_IF_ERROR(AllgatherTo(*impl_, size(), input, nullptr, &out));
  return out;
}

Status Session::Allgather(const TensorView& input, const TensorView& output) {
  if (OnGpu(input)) return IntoGpuOutput(*impl_, "allgather", input, output, Allgather(input));
  Tensor spare;
  return AllgatherTo(*impl_, size(), input, &output, &spare);
}

Result<Tensor> Session::Reducescatter(const TensorView& input, const Reduction& reduction) {
  if (OnGpu(input)) return WaitForOutput(ReducescatterAsync("", input, reduction));
  Tensor out;
  HORA_RETURN_IF_ERROR(ReducescatterTo(*impl_, size(), rank(), input, nullptr, reduction, &out));
  return out;
}

Status Session::Reducescatter(const TensorView& input, const TensorView& output,
                              const Reduction& reduction) {
  if (OnGpu(input)) {
    return IntoGpuOutput(*impl_, "reducescatter", input, output, Reducescatter(input, reduction));
  }
  Tensor spare;
  return ReducescatterTo(*impl_, size(), rank(), input, &output, reduction, &spare);
}

Result<Tensor> Session::Alltoall(const TensorView& input, std::span<const int64_t> splits,
                                 std::vector<int64_t>* received_splits) {
  if (OnGpu(input)) {
    Handle h = AlltoallAsync("", input, splits);
    HORA_RETURN_IF_ERROR(h.Wait(kWaitAsLongAsItTakes));
    if (received_splits != nullptr && h.received_splits() != nullptr) {
      *received_splits = *h.received_splits();
    }
    return WaitForOutput(std::move(h));
  }
  Tensor out;
  HORA_RETURN_IF_ERROR(AlltoallTo(*impl_, size(), input, splits, nullptr, received_splits, &out));
  return out;
}

Status Session::Alltoall(const TensorView& input, std::span<const int64_t> splits,
                         const TensorView& output, std::vector<int64_t>* received_splits) {
  if (OnGpu(input)) {
    return IntoGpuOutput(*impl_, "alltoall", input, output,
                         Alltoall(input, splits, received_splits));
  }
  Tensor spare;
  return AlltoallTo(*impl_, size(), input, splits, &output, received_splits, &spare);
}

}  // namespace hora
