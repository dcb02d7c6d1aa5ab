// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/coordinator.h"

#include <algorithm>

#include "common/units.h"

namespace hora {
namespace {

std::string RankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

Coordinator::Coordinator(int size, Duration stall_warning, Duration stall_shutdown,
                         Duration timeout)
    : size_(size), stall_warning_(stall_warning), joined_(static_cast<size_t>(size), false) {
  if (stall_shutdown > Duration::zero()) {
    fail_after_ = stall_shutdown;
    fail_setting_ = "stalled (HORA_STALL_SHUTDOWN_S)";
  }
  if (timeout > Duration::zero() && (fail_after_ == Duration::zero() || timeout < fail_after_)) {
    fail_after_ = timeout;
    fail_setting_ = "timed out (HORA_TIMEOUT_S)";
  }
}

bool Coordinator::Complete(const Entry& e) const {
  int have = 0;
  for (int p = 0; p < size_; ++p)
    have += e.by_rank[static_cast<size_t>(p)] || joined_[static_cast<size_t>(p)] ? 1 : 0;
  return have == size_;
}

bool Coordinator::RunsWhileJoined(const Entry& e) {
  for (const auto& m : e.by_rank) {
    if (m) return m->op == OpType::kAllreduce;
  }
  return true;
}

void Coordinator::Add(int rank, const std::vector<RequestMeta>& requests, TimePoint now,
                      const std::vector<uint32_t>* waited_ms) {
  for (size_t i = 0; i < requests.size(); ++i) {
    const RequestMeta& m = requests[i];
    if (m.op == OpType::kJoin) {
      RequestMeta j = m;
      j.root = rank;  // who joined
      joins_.push_back(std::move(j));
      continue;
    }
    auto [it, fresh] = table_.try_emplace(m.name);
    Entry& e = it->second;
    if (fresh) {
      if (!spare_by_rank_.empty()) {
        e.by_rank = std::move(spare_by_rank_.back());
        spare_by_rank_.pop_back();
      }
      e.by_rank.resize(static_cast<size_t>(size_));
      e.order = next_order_++;
      e.first = now;
      e.next_report = TimePoint::max();
    }
    if (waited_ms != nullptr && i < waited_ms->size()) {
      e.first = std::min(e.first, now - std::chrono::milliseconds((*waited_ms)[i]));
    }
    if (stall_warning_ > Duration::zero() && !e.reported) {
      e.next_report = e.first + stall_warning_;  // (moves with `first` until the first report)
    }
    auto& slot = e.by_rank[static_cast<size_t>(rank)];
    if (slot) {
      e.duplicate = "rank " + std::to_string(JobRank(rank)) + " submitted it twice";
      continue;
    }
    slot = m;
    ++e.count;
  }
}

Response Coordinator::Decide(const std::string& name, Entry& e) const {
  Response r;
  std::vector<int> joined;  // ranks that have joined (out of data)
  bool have_params = false;
  for (int p = 0; p < size_; ++p) {
    const auto& m = e.by_rank[static_cast<size_t>(p)];
    if (joined_[static_cast<size_t>(p)]) joined.push_back(p);
    if (m && !have_params) {
      r.params = *m;  // the first rank that submitted it
      have_params = true;
    }
  }
  // A rank that refused the call (its own checks failed) decides it: every
  // rank fails it with that rank's reason.
  std::vector<int> refusing;
  for (int p = 0; p < size_; ++p) {
    const auto& m = e.by_rank[static_cast<size_t>(p)];
    if (m && !m->refused.empty()) {
      if (refusing.empty()) r.params = *m;
      refusing.push_back(p);
    }
  }
  if (!refusing.empty()) {
    r.error = r.params.refused;
    if (refusing.size() > 1) r.error += " (refused by " + Ranks(refusing) + ")";
    return r;
  }
  const char* op = OpTypeName(r.params.op);
  if (!joined.empty() && r.params.op != OpType::kAllreduce) {
    r.error = std::string(op) + " '" + name + "': " + Ranks(joined) +
              (joined.size() > 1 ? " have" : " has") +
              " joined (out of data); only allreduce runs while ranks are joined";
    return r;
  }
  if (!e.duplicate.empty()) {
    r.error = std::string(op) + " '" + name + "': " + e.duplicate;
    return r;
  }
  bool agree = true;
  for (const auto& m : e.by_rank) agree = agree && (!m || m->SameParams(r.params));
  if (agree && r.params.op == OpType::kAllgather) {
    for (const auto& m : e.by_rank) r.rows.push_back(m->shape.empty() ? 1 : m->shape[0]);
  }
  if (agree && r.params.op == OpType::kAlltoall) {
    for (int p = 0; p < size_ && r.error.empty(); ++p) {
      const RequestMeta& m = *e.by_rank[static_cast<size_t>(p)];
      if (m.splits.size() != static_cast<size_t>(size_)) {
        r.error = std::string(op) + " '" + name + "': " + Ranks({p}) + " gave " +
                  std::to_string(m.splits.size()) + " splits for " + std::to_string(size_) +
                  " ranks";
      }
      r.rows.insert(r.rows.end(), m.splits.begin(), m.splits.end());
    }
    if (!r.error.empty()) r.rows.clear();
  }
  if (!agree) {
    // When some ranks' tensors are on a GPU and others' not, every rank's
    // device is named (DescribeParams names only a GPU).
    bool mixed = false;
    for (const auto& m : e.by_rank) mixed = mixed || (m && m->device != r.params.device);
    r.error = std::string(op) + " '" + name + "': ranks disagree:";
    for (int p = 0; p < size_; ++p) {
      if (!e.by_rank[static_cast<size_t>(p)]) {
        r.error += " " + Ranks({p}) + " joined" + (p + 1 < size_ ? ";" : "");
        continue;
      }
      const RequestMeta& m = *e.by_rank[static_cast<size_t>(p)];
      r.error += " " + Ranks({p}) + " " +
                 (m.op == r.params.op ? "" : std::string(OpTypeName(m.op)) + " ") +
                 DescribeParams(m) + (mixed && m.device == DeviceType::kCPU ? " on cpu" : "") +
                 (p + 1 < size_ ? ";" : "");
    }
  }
  return r;
}

std::string Coordinator::Report(const std::string& name, const Entry& e, TimePoint now) const {
  std::vector<int> have, missing;
  RequestMeta any;
  for (int p = 0; p < size_; ++p) {
    const auto& m = e.by_rank[static_cast<size_t>(p)];
    (m || joined_[static_cast<size_t>(p)] ? have : missing).push_back(p);
    if (m && (any.name.empty() || m->refused.empty())) any = *m;
  }
  any.name = name;
  return UserName(any) + " has waited " + FormatSeconds(now - e.first) + " s for " +
         Ranks(missing) + " (submitted by " + Ranks(have) + ")" + WaitingElsewhere(missing);
}

std::string Coordinator::WaitingElsewhere(const std::vector<int>& missing) const {
  // Two ranks in different collectives (an allreduce against a broadcast)
  // is a common stall: each missing rank's oldest call that waits, if any.
  constexpr size_t kNamed = 4;
  std::string out;
  size_t named = 0;
  for (int p : missing) {
    const Entry* oldest = nullptr;
    const std::string* oldest_name = nullptr;
    for (const auto& [name, e] : table_) {
      if (e.by_rank[static_cast<size_t>(p)] && (oldest == nullptr || e.order < oldest->order)) {
        oldest = &e;
        oldest_name = &name;
      }
    }
    if (oldest == nullptr) continue;
    if (named++ == kNamed) {
      out += ", ...";
      break;
    }
    RequestMeta m = *oldest->by_rank[static_cast<size_t>(p)];
    m.name = *oldest_name;
    out += (named == 1 ? "; " : ", ") + Ranks({p}) + " waits in " + UserName(m);
  }
  return out;
}

int Coordinator::JobRank(int p) const {
  return job_ranks_.empty() ? p : job_ranks_[static_cast<size_t>(p)];
}

std::string Coordinator::DescribeParams(const RequestMeta& m) const {
  if (job_ranks_.empty() || m.op != OpType::kBroadcast || m.root < 0 || m.root >= size_) {
    return m.DescribeParams();
  }
  RequestMeta named = m;
  named.root = JobRank(m.root);
  return named.DescribeParams();
}

std::string Coordinator::Ranks(const std::vector<int>& ranks) const {
  std::vector<int> named = ranks;
  if (!job_ranks_.empty()) {
    for (int& r : named) r = job_ranks_[static_cast<size_t>(r)];
  }
  return (named.size() > 1 ? "ranks " : "rank ") + RankList(named);
}

std::vector<Response> Coordinator::TakeResponses(TimePoint now) {
  std::vector<Response> out;
  TakeResponses(now, &out);
  return out;
}

void Coordinator::Erase(std::unordered_map<std::string, Entry>::iterator it) {
  std::vector<std::optional<RequestMeta>>& rows = it->second.by_rank;
  if ((spare_by_rank_.size() + 1) * rows.size() <= kSpareSlots) {
    for (auto& m : rows) m.reset();
    spare_by_rank_.push_back(std::move(rows));
  }
  table_.erase(it);
}

void Coordinator::TakeResponses(TimePoint now, std::vector<Response>* responses) {
  std::vector<Response>& out = *responses;
  out.clear();
  // Joins first: every rank applies them before the decisions that follow.
  for (RequestMeta& j : joins_) {
    const int who = j.root;
    Response r;
    r.params = std::move(j);
    if (joined_[static_cast<size_t>(who)]) {
      r.error = "join: " + Ranks({who}) + " joined twice";
      out.push_back(std::move(r));
      continue;
    }
    joined_[static_cast<size_t>(who)] = true;
    const bool last = ++joined_count_ == size_;
    r.rows = {who, last ? 1 : 0};
    out.push_back(std::move(r));
    if (last) {
      std::fill(joined_.begin(), joined_.end(), false);
      joined_count_ = 0;
    }
  }
  joins_.clear();
  std::vector<std::pair<uint64_t, std::string>>& ready = ready_;
  std::vector<std::pair<uint64_t, std::string>>& stalled = stalled_;
  ready.clear();
  stalled.clear();
  for (const auto& [name, e] : table_) {
    // While a rank has joined, only allreduce runs: anything else fails at
    // once, on each rank that submits it (the others may never: their
    // unnamed calls need not line up with it).
    if (Complete(e) || (joined_count_ > 0 && !RunsWhileJoined(e))) {
      ready.emplace_back(e.order, name);
    } else if (fail_after_ > Duration::zero() && now - e.first >= fail_after_) {
      stalled.emplace_back(e.order, name);
    }
  }
  std::sort(ready.begin(), ready.end());
  std::sort(stalled.begin(), stalled.end());
  // A group with a member that failed (its ranks' groups may differ in
  // size: some members then never come) goes out as it is, at once: group
  // -> the first error.
  std::unordered_map<std::string, std::string> failed;
  for (const auto& [order, name] : ready) {
    auto it = table_.find(name);
    Response r = Decide(name, it->second);
    Erase(it);
    if (r.params.group.empty() || failed.contains(r.params.group)) {
      out.push_back(std::move(r));
      continue;
    }
    const std::string group = r.params.group;
    auto& members = held_[group];
    if (!r.error.empty()) failed.emplace(group, r.error);
    members.push_back(std::move(r));
    if (failed.contains(group) || members.size() >= members.front().params.group_size) {
      for (Response& m : members) out.push_back(std::move(m));
      held_.erase(group);
    }
  }
  if (!failed.empty()) FailMembersLeft(failed, &out);
  for (const auto& [order, name] : stalled) {
    auto it = table_.find(name);
    if (it == table_.end()) continue;  // (a member FailMembersLeft failed)
    Response r;
    for (const auto& m : it->second.by_rank) {
      if (m && (r.params.name.empty() || m->refused.empty())) r.params = *m;  // (not a refusal)
    }
    r.error = std::string(fail_setting_) + ": " + Report(name, it->second, now);
    out.push_back(std::move(r));
    Erase(it);
  }
}

void Coordinator::FailMembersLeft(const std::unordered_map<std::string, std::string>& failed,
                                  std::vector<Response>* out) {
  for (auto it = table_.begin(); it != table_.end();) {
    const RequestMeta* meta = nullptr;
    for (const auto& m : it->second.by_rank) {
      if (m && meta == nullptr) meta = &*m;
    }
    const auto f = meta == nullptr ? failed.end() : failed.find(meta->group);
    if (f == failed.end()) {
      ++it;
      continue;
    }
    std::vector<int> missing;
    for (int p = 0; p < size_; ++p) {
      const auto k = static_cast<size_t>(p);
      if (!it->second.by_rank[k] && !joined_[k]) missing.push_back(p);
    }
    Response r;
    r.params = *meta;
    r.error = "'" + it->first + "', a member of group '" + f->first + "' that " + Ranks(missing) +
              " did not submit, fails with its group: " + f->second;
    out->push_back(std::move(r));
    auto next = std::next(it);
    Erase(it);
    it = next;
  }
}

std::vector<std::string> Coordinator::StallReports(TimePoint now) {
  std::vector<std::pair<uint64_t, std::string>> due;
  if (stall_warning_ <= Duration::zero()) return {};
  for (auto& [name, e] : table_) {
    if (!Complete(e) && now >= e.next_report) {
      e.next_report = now + stall_warning_;
      e.reported = true;
      due.emplace_back(e.order, Report(name, e, now));
    }
  }
  std::sort(due.begin(), due.end());
  std::vector<std::string> out;
  for (auto& [order, text] : due) out.push_back(std::move(text));
  return out;
}

}  // namespace hora
