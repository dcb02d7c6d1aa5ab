// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/ring_phases.h"

#include <algorithm>
#include <vector>

#include "collectives/partition.h"

namespace hora {
namespace {

std::vector<size_t> PrefixOffsets(std::span<const size_t> sizes) {
  std::vector<size_t> off(sizes.size() + 1, 0);
  for (size_t i = 0; i < sizes.size(); ++i) off[i + 1] = off[i] + sizes[i];
  return off;
}

}  // namespace

Status RingReduceScatterInPlace(Comm& comm, void* data, std::span<const size_t> counts,
                                DataType dtype, ReduceOp op, uint32_t phase) {
  const int n = comm.size();
  const int r = comm.rank();
  if (n == 1) return Status::Ok();
  const size_t esize = DataTypeSize(dtype);
  const size_t seg = std::max<size_t>(1, comm.segment_bytes() / esize);  // elements per segment
  const std::vector<size_t> off = PrefixOffsets(counts);
  const int left = (r - 1 + n) % n;
  const int right = (r + 1) % n;
  auto* base = static_cast<std::byte*>(data);

  // At step s this rank sends block (r-s-1) and receives block (r-s-2); the
  // block received at step s is reduced and sent on at step s+1, one segment
  // at a time, so the chain of a segment never waits for its whole block.
  auto send_block = [&](int s) { return static_cast<size_t>(((r - s - 1) % n + n) % n); };
  auto recv_block = [&](int s) { return static_cast<size_t>(((r - s - 2) % n + n) % n); };
  // Receives fold straight into `data` (IrecvReduce): no staging buffer,
  // and transports that can read the sender's bytes in place do so.
  std::vector<Request> recvs;
  std::vector<Request> sends;
  auto post_recvs = [&](int s) {
    recvs.clear();
    const size_t b = recv_block(s);
    for (size_t k = 0; k * seg < counts[b]; ++k) {
      const size_t len = std::min(seg, counts[b] - k * seg);
      recvs.push_back(comm.IrecvReduce(
          left, Comm::LocalTag(phase, static_cast<uint32_t>(s), static_cast<uint32_t>(k)),
          base + (off[b] + k * seg) * esize, len, dtype, op));
    }
  };
  auto send_segment = [&](int s, size_t k) {
    const size_t b = send_block(s);
    const size_t len = std::min(seg, counts[b] - k * seg);
    sends.push_back(
        comm.Isend(right, Comm::LocalTag(phase, static_cast<uint32_t>(s), static_cast<uint32_t>(k)),
                   base + (off[b] + k * seg) * esize, len * esize));
  };

  post_recvs(0);
  for (size_t k = 0; k * seg < counts[send_block(0)]; ++k) send_segment(0, k);
  std::vector<Request> current;
  for (int s = 0; s < n - 1; ++s) {
    current.swap(recvs);
    if (s + 1 < n - 1) post_recvs(s + 1);
    for (size_t k = 0; k < current.size(); ++k) {
      HORA_RETURN_IF_ERROR(comm.Wait(current[k]));
      if (s + 1 < n - 1) send_segment(s + 1, k);  // reduced: pass it on
    }
  }
  for (const Request& s : sends) HORA_RETURN_IF_ERROR(comm.Wait(s));
  return Status::Ok();
}

Status RingAllgatherInPlace(Comm& comm, void* data, std::span<const size_t> bytes, uint32_t phase) {
  const int n = comm.size();
  const int r = comm.rank();
  if (n == 1) return Status::Ok();
  const size_t seg = std::max<size_t>(1, comm.segment_bytes());
  const std::vector<size_t> off = PrefixOffsets(bytes);
  const int left = (r - 1 + n) % n;
  const int right = (r + 1) % n;
  auto* base = static_cast<std::byte*>(data);
  auto send_block = [&](int s) { return static_cast<size_t>(((r - s) % n + n) % n); };
  auto recv_block = [&](int s) { return static_cast<size_t>(((r - s - 1) % n + n) % n); };

  // Every block lands in its own place, so all receives can be posted now.
  std::vector<std::vector<Request>> recvs(static_cast<size_t>(n - 1));
  for (int s = 0; s < n - 1; ++s) {
    const size_t b = recv_block(s);
    for (size_t k = 0; k * seg < bytes[b]; ++k) {
      const size_t len = std::min(seg, bytes[b] - k * seg);
      recvs[static_cast<size_t>(s)].push_back(comm.Irecv(
          left, Comm::LocalTag(phase, static_cast<uint32_t>(s), static_cast<uint32_t>(k)),
          base + off[b] + k * seg, len));
    }
  }
  std::vector<Request> sends;
  auto send_segment = [&](int s, size_t k) {
    const size_t b = send_block(s);
    const size_t len = std::min(seg, bytes[b] - k * seg);
    sends.push_back(
        comm.Isend(right, Comm::LocalTag(phase, static_cast<uint32_t>(s), static_cast<uint32_t>(k)),
                   base + off[b] + k * seg, len));
  };
  for (size_t k = 0; k * seg < bytes[send_block(0)]; ++k) send_segment(0, k);
  for (int s = 0; s < n - 1; ++s) {
    auto& step = recvs[static_cast<size_t>(s)];
    for (size_t k = 0; k < step.size(); ++k) {
      HORA_RETURN_IF_ERROR(comm.Wait(step[k]));
      if (s + 1 < n - 1) send_segment(s + 1, k);  // forward what just arrived
    }
  }
  for (const Request& s : sends) HORA_RETURN_IF_ERROR(comm.Wait(s));
  return Status::Ok();
}

}  // namespace hora
