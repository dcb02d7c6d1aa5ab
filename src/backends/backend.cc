// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "backends/backend.h"

#include <cstring>

#include "collectives/bitwise_and.h"
#include "kernels/reduction_identity.h"

namespace hora {

Status CollectiveBackend::AllreduceParts(std::span<const AllreducePart> parts, DataType dtype,
                                         const Reduction& reduction,
                                         std::vector<std::byte>& fusion) {
  if (reduction.op == ReduceOp::kAdasum) {  // not element-wise: one tensor at a time
    for (const AllreducePart& p : parts) {
      HORA_RETURN_IF_ERROR(Allreduce({p.in, p.out, p.count, dtype, reduction}));
    }
    return Status::Ok();
  }
  const size_t esize = DataTypeSize(dtype);
  size_t total = 0;
  for (const AllreducePart& p : parts) total += p.count;
  if (fusion.size() < total * esize) fusion.resize(total * esize);
  size_t off = 0;
  for (const AllreducePart& p : parts) {
    if (p.count > 0) std::memcpy(fusion.data() + off, p.in, p.count * esize);
    off += p.count * esize;
  }
  HORA_RETURN_IF_ERROR(Allreduce({fusion.data(), fusion.data(), total, dtype, reduction}));
  off = 0;
  for (const AllreducePart& p : parts) {
    if (p.count > 0) std::memcpy(p.out, fusion.data() + off, p.count * esize);
    off += p.count * esize;
  }
  return Status::Ok();
}

bool CollectiveBackend::CanCarry(const Comm& control, size_t words, size_t bytes) {
  (void)control, (void)words, (void)bytes;
  return false;
}

Result<bool> CollectiveBackend::AndCarrying(Comm& control, std::span<uint64_t> words,
                                            const CarriedAllreduce* carried) {
  (void)carried;
  HORA_RETURN_IF_ERROR(AllreduceBitwiseAnd(control, words));
  return false;
}

Status CollectiveBackend::AlltoallvAgreed(const void* in, std::span<const size_t> send_bytes,
                                          void* out, std::span<const size_t> recv_bytes,
                                          std::span<const size_t> all_bytes) {
  (void)all_bytes;
  return Alltoallv(in, send_bytes, out, recv_bytes);
}

void CollectiveBackend::FillIdentity(DataType dtype, ReduceOp op, void* data, size_t count) {
  kernels::FillIdentity(dtype, op, data, count);
}

}  // namespace hora
