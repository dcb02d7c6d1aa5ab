// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/staged_chunks.h"

#include <algorithm>
#include <cstring>

namespace hora {

bool RunsInChunks(const RequestMeta& m) {
  return (m.op == OpType::kAllreduce && m.reduction.op != ReduceOp::kAdasum) ||
         m.op == OpType::kBroadcast;
}

size_t ChunkBytes(const RequestMeta& m, size_t chunk, size_t total) {
  if (chunk == 0) return 0;
  const size_t esize = DataTypeSize(m.dtype);
  const size_t at_least = (total / esize + kMaxChunks - 1) / kMaxChunks;  // elements
  return std::max({chunk / esize, at_least, size_t{1}}) * esize;
}

Status RunInChunks(CollectiveBackend& data, const RequestMeta& m, size_t bytes, size_t chunk,
                   const ChunkSteps& steps) {
  const size_t step = chunk == 0 ? std::max<size_t>(bytes, 1) : chunk;
  const size_t esize = DataTypeSize(m.dtype);
  size_t offset = 0;
  do {
    const size_t n = std::min(step, bytes - offset);
    std::byte* at = steps.before(offset, n);
    const Status st = m.op == OpType::kBroadcast
                          ? data.Broadcast(at, n, m.root)
                          : data.Allreduce({at, at, n / esize, m.dtype, m.reduction});
    HORA_RETURN_IF_ERROR(st);
    steps.after(offset, n);
    offset += n;
  } while (offset < bytes);
  return Status::Ok();
}

Status RunStandInsInChunks(CollectiveBackend& data, const std::vector<TensorRecord*>& batch,
                           std::vector<std::byte>* fusion) {
  const RequestMeta& m = batch.front()->meta;
  std::byte* area = static_cast<std::byte*>(batch.front()->input);
  size_t bytes = m.num_bytes();
  if (batch.size() > 1) {  // (only allreduces fuse)
    bytes = 0;
    for (const TensorRecord* p : batch) bytes += p->meta.num_bytes();
    if (fusion->size() < bytes) fusion->resize(bytes);
    area = fusion->data();
    size_t offset = 0;
    for (const TensorRecord* p : batch) {
      const size_t n = p->meta.num_bytes();
      if (n > 0) std::memcpy(area + offset, p->input, n);
      offset += n;
    }
  }
  // (A stand-in's results are dropped: nothing copies them back.)
  return RunInChunks(
      data, m, bytes, ChunkBytes(m, m.staging_chunk, bytes),
      {[area](size_t offset, size_t) { return area + offset; }, [](size_t, size_t) {}});
}

}  // namespace hora
