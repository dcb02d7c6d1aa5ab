// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "backends/host_tiers.h"

#include <algorithm>
#include <cstdint>
#include <set>

#include "collectives/algorithms.h"
#include "transport/shared_window.h"

namespace hora {
namespace {

// What a rank says of its host: whether it shares memory with the other
// ranks there, its place among them, their number, and the first of them.
struct HostWord {
  int32_t shares = 0;
  int32_t place = 0;
  int32_t count = 1;
  int32_t first = 0;
};

}  // namespace

Result<std::unique_ptr<HostTierComms>> HostTierComms::Find(Comm& comm, const Selector* selector,
                                                           std::string* why_not, uint32_t context,
                                                           bool with_window) {
  const int n = comm.size();
  std::vector<int> local;
  Transport* host = comm.transport().ThisHost(&local);
  HostWord mine;
  mine.first = comm.rank();
  if (host != nullptr && host->Window(kHostTierWindow) != nullptr) {
    mine.shares = 1;
    mine.place =
        static_cast<int32_t>(std::find(local.begin(), local.end(), comm.rank()) - local.begin());
    mine.count = static_cast<int32_t>(local.size());
    mine.first = local.front();
  }
  std::vector<HostWord> all(static_cast<size_t>(n));
  const std::vector<size_t> bytes(static_cast<size_t>(n), sizeof(HostWord));
  HORA_RETURN_IF_ERROR(AllgatherRing(comm, &mine, all.data(), bytes));
  std::set<int32_t> hosts;
  int sharing = 0;
  for (const HostWord& w : all) {
    hosts.insert(w.first);
    sharing += w.shares;
  }
  std::unique_ptr<HostTierComms> none;
  if (sharing == 0 || hosts.size() < 2) return none;  // (nothing shares, or one host)
  // (A rank that shares memory with no other counts as a host of one.)
  for (int r = 1; r < n; ++r) {
    const HostWord& w = all[static_cast<size_t>(r)];
    if (w.count != all[0].count) {
      *why_not = "the hosts have different numbers of ranks (rank " + std::to_string(r) +
                 "'s host has " + std::to_string(w.count) + ", rank 0's has " +
                 std::to_string(all[0].count) + ")";
      return none;
    }
  }
  std::vector<int> across;
  for (int r = 0; r < n; ++r) {
    if (all[static_cast<size_t>(r)].place == mine.place) across.push_back(r);
  }
  // The host's Comm sends through the job's transport (which reaches the
  // host's ranks by shared memory, and names every rank as the job does)
  // and steps on the shared-memory transport's window.
  std::unique_ptr<HostTierComms> t(new HostTierComms);
  t->host_view_ = std::make_unique<SubsetTransport>(comm.transport(), local);
  t->host_ = std::make_unique<Comm>(*t->host_view_, comm.waits(), comm.segment_bytes(), context,
                                    with_window ? host->Window(kHostTierWindow) : nullptr);
  // (Named as `comm` names them.)
  const auto numbered = [&comm](std::vector<int> ranks) {
    for (int& r : ranks) r = comm.Number(r);
    return ranks;
  };
  t->host_->SetRankNumbers(numbered(local));
  t->host_->SetBlocksAtOnce(comm.blocks_at_once());
  t->across_view_ = std::make_unique<SubsetTransport>(comm.transport(), across);
  t->across_ =
      std::make_unique<Comm>(*t->across_view_, comm.waits(), comm.segment_bytes(), context);
  t->across_->SetRankNumbers(numbered(across));
  t->across_->SetBlocksAtOnce(comm.blocks_at_once());
  t->tiers_ = HostTiers{t->host_.get(), t->across_.get(), selector, n};
  return t;
}

}  // namespace hora
