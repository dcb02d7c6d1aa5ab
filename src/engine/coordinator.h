// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The coordinator's table (docs/dev/design.md §4, slow path), kept by rank 0 of the
// engine: which ranks have submitted which uncached tensors, with what
// parameters. A tensor every rank has submitted becomes a Response: run it
// when all ranks agree on its parameters, otherwise fail it on every rank
// with a message naming the tensor and each rank's values. Tensors that only
// some ranks submitted are reported after HORA_STALL_WARNING_S (naming the
// missing ranks) and, when HORA_STALL_SHUTDOWN_S or HORA_TIMEOUT_S is set,
// failed after it. A tensor's wait counts from its first submission on any
// rank: a request may say how long it already waited on its rank (a cached
// tensor that waited there before it came to the coordinator).
//
// Join: a rank out of data submits a join request. The coordinator announces
// it to every rank (a kJoin response {rank, 0}) and from then on counts that
// rank as having submitted every allreduce (it contributes identity values);
// any other collective fails at once, on each rank that submits it, with an
// error naming the joined ranks. Once every
// rank has joined, a final kJoin response {last rank to join, 1} ends the
// join everywhere.
//
// Not thread-safe: the engine thread owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "engine/messages.h"

namespace hora {

class Coordinator {
 public:
  // Durations of zero turn the stall warning, the stall shutdown and the
  // timeout off.
  Coordinator(int size, Duration stall_warning, Duration stall_shutdown,
              Duration timeout = Duration::zero());

  // Stall reports name rank r as job rank `job_ranks[r]` (a process set's
  // coordinator; empty: the set is the job).
  void NameRanks(std::vector<int> job_ranks) { job_ranks_ = std::move(job_ranks); }

  // Records `requests`, newly submitted by `rank`; `waited_ms[i]` (if
  // given) is how long request i already waited on that rank.
  void Add(int rank, const std::vector<RequestMeta>& requests, TimePoint now,
           const std::vector<uint32_t>* waited_ms = nullptr);

  // Responses for every tensor now submitted by all ranks (in the order
  // their first submission arrived; members of a group only once the whole
  // group is decided, together), then failures of tensors stalled past the
  // shutdown time. They leave the table.
  std::vector<Response> TakeResponses(TimePoint now);
  // The same into `out` (cleared first; its capacity is reused).
  void TakeResponses(TimePoint now, std::vector<Response>* out);

  // Stall reports due at `now` (each tensor at most once per warning
  // period): "allreduce 'w' has waited 61 s for rank 1 (submitted by ranks
  // 0, 2); rank 1 waits in broadcast 'b'"; a tensor the user did not name
  // is its operation ("barrier").
  std::vector<std::string> StallReports(TimePoint now);

  size_t waiting() const { return table_.size(); }

 private:
  struct Entry {
    std::vector<std::optional<RequestMeta>> by_rank;
    int count = 0;
    uint64_t order = 0;
    TimePoint first{};        // its first submission, on any rank
    TimePoint next_report{};  // when a stall report is due
    bool reported = false;    // a stall report was made
    std::string duplicate;    // a rank submitted the name twice
  };
  std::string Report(const std::string& name, const Entry& e, TimePoint now) const;
  // "; rank 1 waits in broadcast 'b'": what each of `missing` waits in
  // instead (its oldest call not yet decided), for a stall report.
  std::string WaitingElsewhere(const std::vector<int>& missing) const;
  // "rank 2" / "ranks 0, 2": `ranks` as the job numbers them.
  std::string Ranks(const std::vector<int>& ranks) const;
  // Rank p of the set as the job numbers it, and a request's parameters
  // with a broadcast's root so named.
  int JobRank(int p) const;
  std::string DescribeParams(const RequestMeta& m) const;
  // Submitted by every rank, counting ranks that have joined.
  bool Complete(const Entry& e) const;
  // An allreduce: what runs while ranks have joined.
  static bool RunsWhileJoined(const Entry& e);
  Response Decide(const std::string& name, Entry& e) const;
  // Fails the entries left of each group in `failed` (group -> the error of
  // a member that failed): those some ranks never submit (TakeResponses).
  void FailMembersLeft(const std::unordered_map<std::string, std::string>& failed,
                       std::vector<Response>* out);
  // Removes a decided entry, keeping its by_rank list for the next new one.
  void Erase(std::unordered_map<std::string, Entry>::iterator it);

  const int size_;
  // Decided members of groups not yet complete, by group name.
  std::unordered_map<std::string, std::vector<Response>> held_;
  const Duration stall_warning_;
  std::vector<int> job_ranks_;  // see NameRanks
  // After this long a tensor fails (the smaller of the stall shutdown and
  // the timeout, zero: never); `fail_setting_` names which one it is.
  Duration fail_after_{};
  const char* fail_setting_ = "";
  std::unordered_map<std::string, Entry> table_;
  uint64_t next_order_ = 0;
  std::vector<bool> joined_;  // by rank
  int joined_count_ = 0;
  std::vector<RequestMeta> joins_;  // join requests not yet announced, in arrival order
  // What each cycle would otherwise allocate and free again (the
  // negotiator's outcome_ says why): by_rank lists of decided entries, at most kSpareSlots
  // slots in all, and TakeResponses' lists.
  static constexpr size_t kSpareSlots = size_t{1} << 15;
  std::vector<std::vector<std::optional<RequestMeta>>> spare_by_rank_;
  std::vector<std::pair<uint64_t, std::string>> ready_, stalled_;
};

}  // namespace hora
