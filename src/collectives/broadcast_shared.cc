// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Broadcast on a shared window (transport/shared_window.h): the root copies
// each chunk of the message into its region, a step, and every other rank
// copies the chunk out of the root's region. The chunks alternate between
// the region's halves, so the root writes the next chunk while the others
// still read this one. Each byte is copied in once and out once per
// reader, with no syscall and one step a chunk, where the point-to-point
// broadcasts take log2(n) rounds (binomial) or 2(n-1) messages a rank
// (scatter-allgather).
// The first step's word names the root (modulo 256: ranks whose roots
// differ by a multiple of 256 are not told apart; the engine agrees on
// roots before it runs a broadcast) and the size, so ranks that disagree
// fail alike with a Mismatch error.
#include <algorithm>
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/shared_common.h"

namespace hora {

Status BroadcastShared(Comm& comm, void* data, size_t bytes, int root) {
  CollectiveScope scope(comm, "broadcast", "shared_memory");
  const int n = comm.size();
  HORA_RETURN_IF_ERROR(CheckBroadcastRoot(comm, root));
  if (n == 1) return Status::Ok();
  SharedWindow& w = *comm.window();
  const size_t half_bytes = w.bytes() / 2;
  const size_t chunk_bytes = std::min(kBroadcastSharedChunkBytes, half_bytes);
  const bool is_root = comm.rank() == root;
  auto* base = static_cast<std::byte*>(data);
  size_t done = 0;
  do {
    const size_t count = std::min(chunk_bytes, bytes - done);
    const size_t half = w.NextHalf() * half_bytes;
    if (is_root && count > 0) std::memcpy(w.local() + half, base + done, count);
    if (done == 0) {
      HORA_RETURN_IF_ERROR(
          SharedFirstStep(comm, SharedCall::kBroadcast, static_cast<DataType>(root & 0xff), bytes));
    } else {
      HORA_RETURN_IF_ERROR(comm.WindowStep(0));
    }
    if (!is_root && count > 0) std::memcpy(base + done, w.region(root) + half, count);
    done += count;
  } while (done < bytes);
  return Status::Ok();
}

}  // namespace hora
