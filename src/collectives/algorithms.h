// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Hora's collective algorithms, one per file, all written against Comm (the
// transport seam). Each is correct for every world size, including 1 and
// non-powers of two, and every element count, including 0.
//
// Buffers: `in` and `out` may be the same pointer (in place) unless stated.
// All ranks call the same algorithm with matching arguments (sizes that
// disagree fail with a size-mismatch error rather than hanging).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "collectives/comm.h"
#include "hora/types.h"

namespace hora {

// One tensor of a packed allreduce (AllreducePartsShared): `count` elements
// read from `in` and written to `out` (which may be `in`).
struct AllreducePart {
  const void* in = nullptr;
  void* out = nullptr;
  size_t count = 0;
};

// An allreduce over the concatenation of `parts`, described apart from the
// Comm that runs it (one the engine may send along with its bit vector:
// bitwise_and.h).
struct CarriedAllreduce {
  std::span<const AllreducePart> parts;
  DataType dtype = DataType::kFloat32;
  Reduction reduction;
};

struct AllreduceArgs {
  const void* in = nullptr;
  void* out = nullptr;
  size_t count = 0;  // elements
  DataType dtype = DataType::kFloat32;
  Reduction reduction;
};

// Ring: reduce-scatter then allgather, each block cut into segments so that
// transfer of one segment overlaps reduction of another. Bandwidth-optimal:
// every rank sends 2(n-1)/n of the message. Latency 2(n-1) steps.
Status AllreduceRing(Comm& comm, const AllreduceArgs& args);

// Recursive doubling: log2(n) exchanges of the whole message. Fewest steps;
// for small messages. Non-powers of two fold the extra ranks in first.
Status AllreduceRecursiveDoubling(Comm& comm, const AllreduceArgs& args);

// Adasum (ReduceOp::kAdasum): log2(n) pairwise exchanges of the whole
// message, each pair combined by Adasum's formula. n must be a power of two
// and the dtype floating (errors otherwise); the reduction's op is ignored.
Status AllreduceAdasum(Comm& comm, const AllreduceArgs& args);

// Recursive halving-doubling (Rabenseifner): reduce-scatter by recursive
// halving, allgather by recursive doubling. 2 log2(n) steps, bandwidth-optimal.
Status AllreduceHalvingDoubling(Comm& comm, const AllreduceArgs& args);

// On the Comm's shared window (comm.window() non-null; shared_common.h's
// SharedUsable): every rank's input copied once into its region and read
// there by the others, 1 step per chunk (small) or 2 (reduce-scatter of
// pieces, then gather). Ranks that disagree on the size, all having chosen
// this algorithm, fail alike with a Mismatch error (and the window goes on).
Status AllreduceShared(Comm& comm, const AllreduceArgs& args);
// The same over the concatenation of `parts` (the engine's fused tensors),
// read and written in place: the copy into the window is the packing, and
// the gather out of it the unpacking, so no fusion buffer is needed.
Status AllreducePartsShared(Comm& comm, std::span<const AllreducePart> parts, DataType dtype,
                            const Reduction& reduction);

// Hierarchical, for a job spanning hosts with as many ranks on each:
// `host` holds this host's ranks, `across` the ranks at this rank's place
// on every host (backends/host_tiers.h). A ring reduce-scatter within the
// host leaves block l (of the host's L) reduced there on local rank l; the
// ranks at place l allreduce it across hosts with `across_algorithm` (the
// backend's choice, HierarchyPrediction::across), every place at once; a ring allgather within the
// host gives every rank the whole. Across hosts each host sends 2(H-1)/H of the message over its
// link in all, where a flat ring over the job sends 2(n-1)/n over one edge.
struct AllreduceAlgorithm;
Status AllreduceHierarchical(Comm& host, Comm& across, const AllreduceAlgorithm& across_algorithm,
                             const AllreduceArgs& args);
// The same with one rank a host crossing: after the reduce-scatter, local
// rank 0 gathers the host's blocks, allreduces the whole message across
// hosts with the other hosts' local ranks 0 (its `across`; the other
// places' go unused) and finalizes it, and `broadcast` (the backend's
// choice for the host) gives it to the host's ranks. The same bytes over
// each link as a single transfer instead of L at once, for links that lose
// bandwidth when shared (HORA_COST_NET_SHARED_EFFICIENCY), at the price of
// a gather and a broadcast within the host and of one rank reducing the
// whole message; the host's other ranks wait in the broadcast meanwhile.
struct BroadcastAlgorithm;
Status AllreduceHierarchicalOne(Comm& host, Comm& across,
                                const AllreduceAlgorithm& across_algorithm,
                                const BroadcastAlgorithm& broadcast, const AllreduceArgs& args);
// Allgather with per-rank sizes (ring). Rank r's `in` (bytes_per_rank[r] bytes)
// lands in `out` at offset sum(bytes_per_rank[0..r)) on every rank. `in` may
// point at that place in `out`.
Status AllgatherRing(Comm& comm, const void* in, void* out, std::span<const size_t> bytes_per_rank);
// The same on the Comm's shared window (SharedUsable): each rank copies its
// block into its region, a piece a step, and the others' out of theirs.
Status AllgatherShared(Comm& comm, const void* in, void* out,
                       std::span<const size_t> bytes_per_rank);

// OK where a collective was given one split (or size) per rank of `comm`;
// else its error: "reducescatter: 3 splits given for a world of 4".
inline Status CheckSplitCount(const Comm& comm, const char* collective, const char* what,
                              size_t given) {
  if (given == static_cast<size_t>(comm.size())) return Status::Ok();
  return InvalidArgument(std::string(collective) + ": " + std::to_string(given) + " " + what +
                         " given for a world of " + std::to_string(comm.size()));
}

// Broadcast of `bytes` bytes from `root` to everyone, in place. Each
// fails a root outside the Comm with CheckBroadcastRoot's error.
inline Status CheckBroadcastRoot(const Comm& comm, int root) {
  if (root >= 0 && root < comm.size()) return Status::Ok();
  return InvalidArgument("broadcast: root rank " + std::to_string(root) +
                         " is outside the world of " + std::to_string(comm.size()) + " ranks");
}
// Binomial tree: ceil(log2 n) steps of the whole message; for small messages.
Status BroadcastBinomial(Comm& comm, void* data, size_t bytes, int root);
// Scatter from the root, then ring allgather: for large messages.
Status BroadcastScatterAllgather(Comm& comm, void* data, size_t bytes, int root);
// On the Comm's shared window (ranks of one host, SharedUsable): the root
// copies each chunk (of kBroadcastSharedChunkBytes, at most half a region)
// into its region once, and every other rank copies it out; one step a
// chunk. The root's copy of one chunk overlaps the others' copies of the
// one before: against half a region (1 MiB), at np 4 on 2 cores 4 MiB took
// 595 us against 699-714 and 16 MiB 2.48 ms against 2.75-2.77; 512 KiB fell
// between (docs/dev/performance.md, session 64).
inline constexpr size_t kBroadcastSharedChunkBytes = size_t{256} << 10;
Status BroadcastShared(Comm& comm, void* data, size_t bytes, int root);

// Reduce-scatter (ring): `in` holds sum(counts) elements on every rank; rank r
// receives the reduction of block r (counts[r] elements, blocks in rank order)
// in `out`. Splits may be uneven and may be zero. `in` and `out` must not overlap.
Status ReducescatterRing(Comm& comm, const void* in, void* out, std::span<const size_t> counts,
                         DataType dtype, const Reduction& reduction);
// The same on the Comm's shared window (SharedUsable): each rank copies the
// others' blocks into its region a piece at a time and reduces its own block
// from its input and their regions straight into `out`.
Status ReducescatterShared(Comm& comm, const void* in, void* out, std::span<const size_t> counts,
                           DataType dtype, const Reduction& reduction);

// Alltoall with per-rank splits (pairwise exchange, n-1 steps). `in` holds
// send_bytes[p] bytes for each rank p in rank order; `out` receives
// recv_bytes[p] bytes from each rank p in rank order. No overlap allowed.
Status AlltoallPairwise(Comm& comm, const void* in, std::span<const size_t> send_bytes, void* out,
                        std::span<const size_t> recv_bytes);

// The same on the Comm's shared window (SharedUsable), where every rank
// knows every rank's splits: `all_bytes[p * n + q]` is what rank p sends
// rank q (alike on every rank). Each round every rank copies up to a slot
// of each block it sends into its region (AlltoallSharedSlotBytes: half a
// region over the ranks), one step, and copies the pieces left for it out.
Status AlltoallShared(Comm& comm, const void* in, void* out, std::span<const size_t> all_bytes);
size_t AlltoallSharedSlotBytes(const SharedWindow& window);

// Every rank's `mine` arrives at `root`, in rank order (others get nothing).
Result<std::vector<std::vector<uint8_t>>> GatherBytes(Comm& comm, int root,
                                                      const std::vector<uint8_t>& mine);
// root's `data` replaces `data` on every rank.
Status BroadcastBytes(Comm& comm, int root, std::vector<uint8_t>& data);

// Dissemination barrier: ceil(log2 n) rounds of empty messages.
Status BarrierDissemination(Comm& comm);
// One step of the Comm's shared window.
Status BarrierShared(Comm& comm);

}  // namespace hora
