// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The collective of a batch of GPU tensors, run in chunks (pipelined
// staging, docs/dev/gpu.md, "How staging works"): the batch's bytes, packed one tensor after
// another, go to the backend a chunk at a time, each chunk its own call, so
// that the device copies the next chunk in, and the last one out, while the
// backend works on this one. Allreduce (not Adasum, whose coefficients span
// a whole tensor) and broadcast run so.
//
// Every rank of a batch of GPU tensors runs it this way, a joined rank on its
// host placeholders too (RunPlaceholdersInChunks), with the same chunk size
// (HORA_STAGING_CHUNK_BYTES, which ranks agree on when the Session is made:
// gpu_routing.h), so that all agree on every call on the wire.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "backends/backend.h"
#include "device/batch_verdict.h"
#include "engine/tensor_records.h"

namespace hora {

// Whether a batch of GPU tensors of `m`'s collective runs in chunks.
bool RunsInChunks(const RequestMeta& m);

// The chunk of a batch of `total` bytes of `m`'s dtype, for a setting of
// `chunk` bytes: whole elements (at least one), and no more than
// kMaxChunks chunks in all (a larger chunk where the setting would make more).
// 0 (no chunking) stays 0. The same on every rank for the same batch.
inline constexpr size_t kMaxChunks = 1024;
size_t ChunkBytes(const RequestMeta& m, size_t chunk, size_t total);

struct ChunkSteps {
  // Before chunk [offset, offset + n) of the packed bytes runs: where its
  // bytes are (ready for the backend).
  std::function<std::byte*(size_t offset, size_t n)> before;
  // After it ran, its results at the same place.
  std::function<void(size_t offset, size_t n)> after;
};

// The batch's verdict (batch_verdict.h): this rank, the ranks, what this
// rank gave (asked once its last chunk's place is known), and where to put
// what every rank gave.
struct ChunkVerdict {
  int rank = 0;
  int size = 1;
  std::function<BatchPart()> mine;
  BatchVerdict* told = nullptr;
};

// Runs `m`'s collective over `bytes` packed bytes in chunks of `chunk`
// (ChunkBytes; 0: one), at least one call. Each chunk's error ends it.
// The verdict is told with the last chunk, before its `after`: in a trailer
// of TrailerBytes(m, size) bytes, which the last chunk's place has room
// for after its own bytes, or by AgreeOnBatch.
Status RunInChunks(CollectiveBackend& data, const RequestMeta& m, size_t bytes, size_t chunk,
                   const ChunkSteps& steps, const ChunkVerdict& verdict);

// A joined rank's batch of placeholders for GPU tensors: packed into `fusion`
// (one tensor without room for the trailer: where it is) and run as
// RunInChunks does, in chunks of `chunk` bytes (HORA_STAGING_CHUNK_BYTES),
// with the verdict.
Status RunPlaceholdersInChunks(CollectiveBackend& data, const std::vector<TensorRecord*>& batch,
                               std::vector<std::byte>* fusion, int rank, int size, size_t chunk);

}  // namespace hora
