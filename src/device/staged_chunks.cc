// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "device/staged_chunks.h"

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
                   const ChunkSteps& steps, const ChunkVerdict& verdict) {
  const size_t step = chunk == 0 ? std::max<size_t>(bytes, 1) : chunk;
  const size_t esize = DataTypeSize(m.dtype);
  const size_t trailer = verdict.told != nullptr ? TrailerBytes(m, verdict.size) : 0;
  size_t offset = 0;
  do {
    const size_t n = std::min(step, bytes - offset);
    const bool last = offset + n >= bytes;
    std::byte* at = steps.before(offset, n);
    size_t with = n;
    if (last && trailer > 0) {
      PutTrailer(m, verdict.rank, verdict.size, verdict.mine(), at + n);
      with += trailer;
    }
    const Status st = m.op == OpType::kBroadcast
                          ? data.Broadcast(at, with, m.root)
                          : data.Allreduce({at, at, with / esize, m.dtype, m.reduction});
    HORA_RETURN_IF_ERROR(st);
    if (last && verdict.told != nullptr) {
      if (trailer > 0) {
        *verdict.told = ReadTrailer(m, verdict.rank, verdict.size, at + n);
      } else {
        std::vector<uint8_t> scratch;
        *verdict.told = AgreeOnBatch(data, m, verdict.rank, verdict.size, verdict.mine(), scratch);
      }
    }
    steps.after(offset, n);
    offset += n;
  } while (offset < bytes);
  return Status::Ok();
}

Status RunPlaceholdersInChunks(CollectiveBackend& data, const std::vector<TensorRecord*>& batch,
                               std::vector<std::byte>* fusion, int rank, int size, size_t chunk) {
  const RequestMeta& m = batch.front()->meta;
  std::byte* area = static_cast<std::byte*>(batch.front()->input);
  size_t bytes = m.num_bytes();
  const size_t trailer = TrailerBytes(m, size);
  if (batch.size() > 1 || trailer > 0) {  // (only allreduces fuse)
    bytes = 0;
    for (const TensorRecord* p : batch) bytes += p->meta.num_bytes();
    if (fusion->size() < bytes + trailer) fusion->resize(bytes + trailer);
    area = fusion->data();
    size_t offset = 0;
    for (const TensorRecord* p : batch) {
      const size_t n = p->meta.num_bytes();
      if (n > 0) std::memcpy(area + offset, p->input, n);
      offset += n;
    }
  }
  // (A placeholder's results are dropped: nothing copies them back. Nor does
  // another rank's failure fail this rank, whose handle is its join's.)
  BatchVerdict told;
  HORA_RETURN_IF_ERROR(
      RunInChunks(data, m, bytes, ChunkBytes(m, chunk, bytes),
                  {[area](size_t offset, size_t) { return area + offset; }, [](size_t, size_t) {}},
                  {rank, size, [] { return BatchPart::kWhole; }, &told}));
  return told.ran;
}

}  // namespace hora
