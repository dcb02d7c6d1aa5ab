// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Alltoall on a shared window (transport/shared_window.h), where every rank
// knows every rank's splits. A round's half of each region is cut into one
// slot per rank: in each round every rank copies a piece of its block for
// rank q (up to a slot) into its slot q, one step, and then copies the piece
// each other rank left in its slot r into its output. Its own block goes
// from its input to its output directly. Rounds alternate the regions'
// halves (NextHalf), as the allgather's do.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/shared_common.h"

namespace hora {

size_t AlltoallSharedSlotBytes(const SharedWindow& window) {
  // (A cache line's multiple, so that no two ranks' pieces share a line.)
  return window.bytes() / 2 / static_cast<size_t>(window.size()) / 64 * 64;
}

Status AlltoallShared(Comm& comm, const void* in, void* out, std::span<const size_t> all_bytes) {
  CollectiveScope scope(comm, "alltoall", "shared_memory");
  const auto n = static_cast<size_t>(comm.size());
  const auto r = static_cast<size_t>(comm.rank());
  if (all_bytes.size() != n * n) {
    return InvalidArgument("alltoall: " + std::to_string(all_bytes.size()) +
                           " splits given for every rank's, " + std::to_string(n * n) +
                           " in a world of " + std::to_string(n));
  }
  auto bytes = [&](size_t from, size_t to) { return all_bytes[from * n + to]; };
  std::vector<size_t> soff(n, 0), roff(n, 0);
  for (size_t q = 1; q < n; ++q) {
    soff[q] = soff[q - 1] + bytes(r, q - 1);
    roff[q] = roff[q - 1] + bytes(q - 1, r);
  }
  const auto* src = static_cast<const std::byte*>(in);
  auto* dst = static_cast<std::byte*>(out);
  auto own = [&] {
    if (bytes(r, r) > 0) std::memcpy(dst + roff[r], src + soff[r], bytes(r, r));
  };
  if (n == 1) {
    own();
    return Status::Ok();
  }
  SharedWindow& w = *comm.window();
  const size_t slot = AlltoallSharedSlotBytes(w);
  if (slot == 0) {
    return InvalidArgument("alltoall: the shared window's regions (" + std::to_string(w.bytes()) +
                           " bytes) are too small for a slot per rank among " + std::to_string(n) +
                           " ranks");
  }
  size_t longest = 0, total = 0;
  for (size_t p = 0; p < n; ++p) {
    for (size_t q = 0; q < n; ++q) {
      total += bytes(p, q);
      if (p != q) longest = std::max(longest, bytes(p, q));
    }
  }
  size_t done = 0;
  bool first = true;
  do {
    const size_t half = w.NextHalf() * (w.bytes() / 2);
    auto length = [&](size_t from, size_t to) {
      return std::min(slot, bytes(from, to) - std::min(bytes(from, to), done));
    };
    for (size_t q = 0; q < n; ++q) {
      if (q != r && length(r, q) > 0) {
        std::memcpy(w.local() + half + q * slot, src + soff[q] + done, length(r, q));
      }
    }
    if (first) {
      // (The data type's byte holds the splits' hash: bytes have no type.)
      HORA_RETURN_IF_ERROR(SharedFirstStep(comm, SharedCall::kAlltoall,
                                           static_cast<DataType>(SplitsHash(all_bytes)), total));
      first = false;
      own();
    } else {
      HORA_RETURN_IF_ERROR(comm.WindowStep(0));
    }
    for (size_t q = 0; q < n; ++q) {
      if (q != r && length(q, r) > 0) {
        std::memcpy(dst + roff[q] + done, w.region(static_cast<int>(q)) + half + r * slot,
                    length(q, r));
      }
    }
    done += slot;
  } while (done < longest);
  return Status::Ok();
}

}  // namespace hora
