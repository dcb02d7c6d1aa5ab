// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "api/process_set_state.h"

#include <algorithm>

#include "api/process_set_windows.h"
#include "backends/hora_backend.h"

namespace hora {

ProcessSetState::ProcessSetState(int id_, std::vector<int> ranks_, int slot_, Transport& transport,
                                 const Config& config, Selector selector, const Logger* logger,
                                 bool job_spans_hosts)
    : id(id_), ranks(std::move(ranks_)), slot(slot_) {
  rank = SetRank(transport.rank());
  if (!member()) return;
  Transport* t = &transport;
  if (id != 0) {
    view = std::make_unique<SubsetTransport>(transport, ranks);
    t = view.get();
  }
  const WaitPolicy waits = WaitPolicy::FromConfig(config, logger);
  const auto context = static_cast<uint32_t>(2 * slot);
  if (view != nullptr && ranks.size() > 1) {
    // (Exchanged on the control context before its Comm exists: every
    // message of the exchange is received before it returns, and the
    // Comm's own tags start anew.)
    Result<std::unique_ptr<GroupWindows>> w = OpenProcessSetWindows(
        transport, *view, ranks, static_cast<uint64_t>(id), context + 2, waits, logger);
    if (!w.ok()) {  // a member lost or late: the set is not made (AddProcessSet fails)
      failed = w.status();
      return;
    }
    windows = std::move(*w);
  }
  data_comm = std::make_unique<Comm>(*t, waits, config.ring_segment_bytes, context + 1,
                                     windows ? windows->Window(1) : nullptr);
  control_comm = std::make_unique<Comm>(*t, waits, config.ring_segment_bytes, context + 2,
                                        windows ? windows->Window(2) : nullptr);
  if (view != nullptr) {  // (errors name the set's ranks as the job does)
    data_comm->SetRankNumbers(ranks);
    control_comm->SetRankNumbers(ranks);
  }
  data_comm->SetBlocksAtOnce(BlocksAtOnceOf(config));
  control_comm->SetBlocksAtOnce(BlocksAtOnceOf(config));
  backend = CreateHoraBackend(*data_comm, std::move(selector), HierarchyOf(config),
                              job_spans_hosts && id == 0, logger);
}

int ProcessSetState::SetRank(int global) const {
  const auto it = std::lower_bound(ranks.begin(), ranks.end(), global);
  return it != ranks.end() && *it == global ? static_cast<int>(it - ranks.begin()) : -1;
}

std::string RankListText(std::span<const int> ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

std::string ProcessSetState::Label() const {
  if (id == 0) return "";
  return "process set " + std::to_string(id) + " (ranks " + RankListText(ranks) + ")";
}

}  // namespace hora
