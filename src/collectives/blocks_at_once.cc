// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/blocks_at_once.h"

#include <cstring>
#include <optional>
#include <vector>

namespace hora {

bool BlocksReadInPlace(Transport& transport, std::span<const size_t> bytes) {
  const int n = static_cast<int>(bytes.size());
  if (n <= 2) return false;
  for (int a = 0; a < n; ++a) {
    const size_t block = bytes[static_cast<size_t>(a)];
    for (int b = 0; b < n && block > 0; ++b) {
      if (b != a && !transport.ReadsInPlace(a, b, block)) return false;
    }
  }
  return true;
}

namespace {

// What HORA_BLOCKS_AT_ONCE decides alone: never below three ranks, and
// always or never where it says so; nullopt where it leaves the choice to
// whether blocks are read in place (auto).
std::optional<bool> Decided(const Comm& comm) {
  if (comm.size() <= 2) return false;
  switch (comm.blocks_at_once()) {
    case BlocksAtOnce::kOff:
      return false;
    case BlocksAtOnce::kOn:
      return true;
    case BlocksAtOnce::kAuto:
      break;
  }
  return std::nullopt;
}

}  // namespace

bool AllgatherAtOnce(Comm& comm, std::span<const size_t> bytes) {
  if (const std::optional<bool> d = Decided(comm)) return *d;
  return BlocksReadInPlace(comm.transport(), bytes);
}

bool AlltoallAtOnce(Comm& comm, std::span<const size_t> send_bytes) {
  if (const std::optional<bool> d = Decided(comm)) return *d;
  const int n = comm.size();
  const int r = comm.rank();
  Transport& t = comm.transport();
  for (int s = 1; s < n; ++s) {
    const int to = (r + s) % n;
    const size_t bytes = send_bytes[static_cast<size_t>(to)];
    if (bytes > 0 && !t.ReadsInPlace(r, to, bytes)) return false;
  }
  return true;
}

Status AllgatherBlocksAtOnce(Comm& comm, void* data, std::span<const size_t> bytes, uint32_t phase,
                             int skip, const void* own) {
  const int n = comm.size();
  const int r = comm.rank();
  std::vector<size_t> off(static_cast<size_t>(n) + 1, 0);
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) off[i + 1] = off[i] + bytes[i];
  auto* base = static_cast<std::byte*>(data);
  std::vector<Request> reqs;
  reqs.reserve(2 * static_cast<size_t>(n));
  // In step s rank r receives rank r-s's block and sends its own to r+s
  // (the tag names the step, as the pairs would).
  for (int s = 1; s < n; ++s) {
    const auto from = static_cast<size_t>((r - s + n) % n);
    if (r == skip || bytes[from] == 0) continue;
    reqs.push_back(comm.Irecv(static_cast<int>(from),
                              Comm::LocalTag(phase, static_cast<uint32_t>(s), 0), base + off[from],
                              bytes[from]));
  }
  const auto me = static_cast<size_t>(r);
  const void* mine = own != nullptr ? own : base + off[me];
  for (int s = 1; s < n && bytes[me] > 0; ++s) {
    const int to = (r + s) % n;
    if (to == skip) continue;
    reqs.push_back(
        comm.Isend(to, Comm::LocalTag(phase, static_cast<uint32_t>(s), 0), mine, bytes[me]));
  }
  // (np 4 on two cores, allgather of 16 MiB against the copy before the
  // sends: faster in 12 rounds of 14, by 6% at the median;
  // docs/dev/performance.md, session 65.)
  if (mine != base + off[me] && bytes[me] > 0) std::memmove(base + off[me], mine, bytes[me]);
  // (A failure leaves the rest to the caller's scope, which cancels them.)
  for (const Request& q : reqs) HORA_RETURN_IF_ERROR(comm.Wait(q));
  return Status::Ok();
}

}  // namespace hora
