// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Collectives of byte vectors whose sizes differ by rank: the engine's
// requests to its coordinator (a linear gather, sizes first) and the
// coordinator's decisions (a binomial broadcast, size first).
#include <vector>

#include "collectives/algorithms.h"

namespace hora {

Result<std::vector<std::vector<uint8_t>>> GatherBytes(Comm& comm, int root,
                                                      const std::vector<uint8_t>& mine) {
  CollectiveScope scope(comm, "engine negotiation", "gather to the coordinator");
  const int n = comm.size();
  std::vector<std::vector<uint8_t>> all;
  if (comm.rank() != root) {
    const uint64_t size = mine.size();
    Request s1 = comm.Isend(root, Comm::LocalTag(0, 0, 0), &size, sizeof size);
    Request s2 = comm.Isend(root, Comm::LocalTag(1, 0, 0), mine.data(), mine.size());
    HORA_RETURN_IF_ERROR(comm.Wait(s1));
    HORA_RETURN_IF_ERROR(comm.Wait(s2));
    return all;
  }
  all.resize(static_cast<size_t>(n));
  std::vector<uint64_t> sizes(static_cast<size_t>(n), 0);
  std::vector<Request> reqs;
  for (int p = 0; p < n; ++p) {
    if (p != root) reqs.push_back(comm.Irecv(p, Comm::LocalTag(0, 0, 0), &sizes[p], 8));
  }
  for (const Request& r : reqs) HORA_RETURN_IF_ERROR(comm.Wait(r));
  reqs.clear();
  for (int p = 0; p < n; ++p) {
    if (p == root) {
      all[p] = mine;
      continue;
    }
    if (sizes[p] > (uint64_t{1} << 32)) {
      return InvalidArgument("rank " + std::to_string(comm.Number(root)) +
                             ": engine negotiation: rank " + std::to_string(comm.Number(p)) +
                             " announced " + std::to_string(sizes[p]) + " bytes of requests");
    }
    all[p].resize(sizes[p]);
    reqs.push_back(comm.Irecv(p, Comm::LocalTag(1, 0, 0), all[p].data(), all[p].size()));
  }
  for (const Request& r : reqs) HORA_RETURN_IF_ERROR(comm.Wait(r));
  return all;
}

Status BroadcastBytes(Comm& comm, int root, std::vector<uint8_t>& data) {
  uint64_t size = data.size();
  HORA_RETURN_IF_ERROR(BroadcastBinomial(comm, &size, sizeof size, root));
  if (size > (uint64_t{1} << 32)) {
    return InvalidArgument("rank " + std::to_string(comm.Number(comm.rank())) +
                           ": engine negotiation: the coordinator announced " +
                           std::to_string(size) + " bytes of responses");
  }
  data.resize(size);
  return BroadcastBinomial(comm, data.data(), data.size(), root);
}

}  // namespace hora
