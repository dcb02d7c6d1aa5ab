// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The seam between a Session and whoever moves the data of a collective
// (docs/dev/design.md §2, backends): Hora's own algorithms over a point-to-point
// transport (backends/hora_backend.h), or the collectives of the MPI
// library the job was started with (mpi/mpi_plugin.h, HORA_BACKEND=mpi), so
// that the two can be compared in one job. Arguments arrive checked (valid tensors, matching sizes,
// defined reductions); the backend only moves and reduces bytes.
//
// Every call is bounded by the Session's timeout. Every rank makes the same
// sequence of calls. Not thread-safe: one collective at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/algorithms.h"
#include "common/config.h"
#include "hora/status.h"
#include "hora/types.h"

namespace hora {

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  // "hora", "mpi" or "mpi-blocking".
  virtual const char* name() const = 0;

  virtual Status Allreduce(const AllreduceArgs& args) = 0;
  // One allreduce over the concatenation of `parts` (the engine's fused
  // tensors of one dtype and reduction), as if packed into one buffer. This
  // default packs them into `fusion` (grown as needed), runs Allreduce on it
  // and unpacks; a backend whose algorithm copies its input anyway (the
  // shared window) reads and writes the parts where they are.
  virtual Status AllreduceParts(std::span<const AllreducePart> parts, DataType dtype,
                                const Reduction& reduction, std::vector<std::byte>& fusion);
  // The engine's fast path sends its cycle's cached allreduce along with the
  // AND of its bit vector on `control` (its control plane's Comm), where the
  // backend can: whether an allreduce of `bytes` bytes can go with `words`
  // words (this default: never).
  virtual bool CanCarry(const Comm& control, size_t words, size_t bytes);
  // The AND of `words` over `control` (collectives/bitwise_and.h), carrying
  // `carried` (null: nothing) where CanCarry: true when it ran on every rank.
  // This default carries nothing.
  virtual Result<bool> AndCarrying(Comm& control, std::span<uint64_t> words,
                                   const CarriedAllreduce* carried);
  // Fills a joined rank's placeholder for an allreduce with the identity of
  // `op` (zeros for a sum), `count` elements at `data`.
  virtual void FillIdentity(DataType dtype, ReduceOp op, void* data, size_t count);
  // Rank r's `in` (bytes_per_rank[r] bytes) lands in `out` at offset
  // sum(bytes_per_rank[0..r)) on every rank.
  virtual Status Allgatherv(const void* in, void* out, std::span<const size_t> bytes_per_rank) = 0;
  virtual Status Broadcast(void* data, size_t bytes, int root) = 0;
  // Rank r receives the reduction of block r (counts[r] elements); `in` and
  // `out` do not overlap.
  virtual Status Reducescatter(const void* in, void* out, std::span<const size_t> counts,
                               DataType dtype, const Reduction& reduction) = 0;
  virtual Status Alltoallv(const void* in, std::span<const size_t> send_bytes, void* out,
                           std::span<const size_t> recv_bytes) = 0;
  // Whether AlltoallvAgreed would use every rank's splits (this default:
  // no), so that a caller gathers them only where they help. Alike on every
  // rank.
  virtual bool WantsAlltoallSplits() const { return false; }
  // The same where every rank knows every rank's splits, alike:
  // `all_bytes[p * n + q]` is what rank p sends rank q (`send_bytes` and
  // `recv_bytes` this rank's row and column of it). A backend may choose its
  // algorithm by them; this default runs Alltoallv.
  virtual Status AlltoallvAgreed(const void* in, std::span<const size_t> send_bytes, void* out,
                                 std::span<const size_t> recv_bytes,
                                 std::span<const size_t> all_bytes);
  virtual Status Barrier() = 0;

  // Autotuning's new allreduce choice (every rank calls it at the same
  // point): HORA_ALLREDUCE_ALGO's syntax, and HORA_HIERARCHICAL_ALLREDUCE.
  // A backend that chooses no algorithms keeps its own (the default).
  virtual Status Retune(std::string_view allreduce_algo, Hierarchy hierarchy) {
    (void)allreduce_algo;
    (void)hierarchy;
    return Status::Ok();
  }
};

}  // namespace hora
