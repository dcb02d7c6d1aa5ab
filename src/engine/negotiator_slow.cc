// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The negotiator's slow path: this rank's uncached tensors go to the
// coordinator (rank 0), whose decisions come back to every rank, which
// caches them in the same order; join announcements among them change the
// join state in that order.
#include <algorithm>

#include "engine/negotiator.h"

namespace hora {

Status Negotiator::SlowPath(NegotiationCounts* counts) {
  SlowScratch& s = slow_;
  s.mine.clear();
  s.waited.clear();
  const TimePoint sending = Clock::now();
  for (Ticket* t = taken_.front(); t != nullptr; t = t->next) {
    if (t->state != Ticket::State::kNew) continue;
    s.mine.push_back(t->meta);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(sending - t->taken).count();
    s.waited.push_back(static_cast<uint32_t>(std::clamp<int64_t>(ms, 0, UINT32_MAX)));
    t->state = Ticket::State::kSent;
  }
  EncodeRequests(s.mine, &s.encoded, &s.waited);
  HORA_ASSIGN_OR_RETURN(auto gathered, control_.Gather(0, s.encoded));
  s.responses.clear();
  uint64_t bytes = rank_ == 0 ? 0 : s.encoded.size() + 8;
  if (coordinator_) {
    const TimePoint now = Clock::now();
    for (int p = 0; p < size_; ++p) {
      const auto& raw = gathered[static_cast<size_t>(p)];
      Status decoded = DecodeRequests(raw.data(), raw.size(), &s.peer, &s.peer_waited);
      if (!decoded.ok()) {
        const auto job = [&](int r) {
          return std::to_string(job_ranks_.empty() ? r : job_ranks_[static_cast<size_t>(r)]);
        };
        return decoded.WithContext("rank " + job(0) + ": engine coordinator: from rank " + job(p));
      }
      coordinator_->Add(p, s.peer, now, &s.peer_waited);
      if (p != 0) bytes += raw.size() + 8;
    }
    for (const std::string& report : coordinator_->StallReports(now)) {
      logger_.Warning("stall: " + (label_.empty() ? "" : label_ + ": ") + report);
    }
    coordinator_->TakeResponses(now, &s.decided);
    EncodeResponses(s.decided, &s.responses);
  }
  HORA_RETURN_IF_ERROR(control_.Broadcast(0, s.responses));
  bytes += s.responses.size() + 8;
  HORA_RETURN_IF_ERROR(DecodeResponses(s.responses.data(), s.responses.size(), &s.decided));
  const uint64_t evicted_before = cache_.evictions();
  for (Response& r : s.decided) {
    auto shared = std::make_shared<const Response>(std::move(r));
    if (shared->error.empty() && shared->params.cacheable) cache_.Insert(shared);
    const Response& d = *shared;
    held_.push_back(std::move(shared));
    if (d.params.op == OpType::kJoin) ApplyJoin(d);
    // A tensor this rank may not have: an allreduce it joins with identity
    // values when it is out of data (the engine looks for its own first).
    const bool placeholder =
        d.error.empty() && d.params.op == OpType::kAllreduce && joined_[static_cast<size_t>(rank_)];
    outcome_.decisions.push_back({&d, nullptr, placeholder, joined_count_ > 0});
  }
  ++counts->slow_cycles;
  counts->coordinator_bytes += bytes;
  counts->evictions += cache_.evictions() - evicted_before;
  return Status::Ok();
}

void Negotiator::ApplyJoin(const Response& r) {
  if (!r.error.empty()) return;  // (the engine fails the join)
  const auto who = static_cast<size_t>(r.rows.at(0));
  if (r.rows.at(1) == 0) {
    joined_[who] = true;
    ++joined_count_;
    return;
  }
  // Every rank has joined: the join is over.
  std::fill(joined_.begin(), joined_.end(), false);
  joined_count_ = 0;
}

}  // namespace hora
