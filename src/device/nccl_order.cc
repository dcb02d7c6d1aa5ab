// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "device/nccl_order.h"

#include <algorithm>
#include <utility>

namespace hora {
namespace {

std::string Seconds(Duration d) {
  return std::to_string(static_cast<long long>(DurationToSeconds(d) + 0.5)) + " s";
}

std::string SetName(int set) {
  return set == 0 ? std::string("the global process set") : "process set " + std::to_string(set);
}

}  // namespace

uint64_t NcclOrder::Submitted(int set, const std::string* name) {
  MutexLock lock(mu_);
  const uint64_t n = next_++;
  sets_[set].unrun.emplace(n, name);
  return n;
}

void NcclOrder::Finished(int set, uint64_t number) {
  if (number == 0) return;
  {
    MutexLock lock(mu_);
    auto it = sets_.find(set);
    if (it == sets_.end() || it->second.unrun.erase(number) == 0) return;
  }
  cv_.notify_all();
}

uint64_t NcclOrder::Earliest(const SetOrder& s) {
  if (s.waiting != 0) return s.waiting;
  if (s.unrun.empty()) return kNever;
  return std::max(s.last, s.unrun.begin()->first);
}

const std::pair<const int, NcclOrder::SetOrder>* NcclOrder::Before(int set, uint64_t place) const {
  const std::pair<const int, SetOrder>* first = nullptr;
  uint64_t earliest = place;
  for (const auto& entry : sets_) {
    if (entry.first == set) continue;
    if (entry.first == holder_) return &entry;
    const uint64_t e = Earliest(entry.second);
    if (e < earliest) {
      earliest = e;
      first = &entry;
    }
  }
  return first;
}

std::string NcclOrder::Describe(const std::pair<const int, SetOrder>& before) const {
  const SetOrder& s = before.second;
  std::string out = SetName(before.first);
  if (before.first == holder_) return out + ", whose NCCL calls are being made";
  if (s.waiting != 0) return out + ", whose earlier batch waits for its turn";
  out += "'s '" + *s.unrun.begin()->second + "'";
  return out + " (submitted before it on this rank, and not yet run)";
}

Result<NcclOrder::Turn> NcclOrder::Await(int set, std::span<const uint64_t> numbers,
                                         const Wait& wait) {
  const TimePoint start = Clock::now();
  const TimePoint deadline =
      wait.timeout > Duration::zero() && wait.timeout < Duration::max() - start.time_since_epoch()
          ? start + wait.timeout
          : TimePoint::max();
  TimePoint warn_at = wait.warn_every > Duration::zero() &&
                              wait.warn_every < Duration::max() - start.time_since_epoch()
                          ? start + wait.warn_every
                          : TimePoint::max();
  MutexLock lock(mu_);
  SetOrder& mine = sets_[set];
  uint64_t place = mine.last;
  uint64_t first = kNever;
  for (uint64_t n : numbers) {
    if (n != 0) first = std::min(first, n);
  }
  if (first != kNever) place = std::max(place, first);
  // (Its place from now on, whether its turn comes or not: every rank of
  // the set waits for this batch's turn, and each set's next place must
  // follow from the same batches on every rank.)
  mine.last = place;
  mine.waiting = place;
  cv_.notify_all();  // (it may hold the others back less than its tensors did)
  auto stop_waiting = [&] {
    mine.waiting = 0;
    cv_.notify_all();  // (its place no longer holds the others back)
  };
  for (;;) {
    const auto* before = Before(set, place);
    if (before == nullptr && holder_ == kNobody) break;
    if (mine.cancelled) {
      stop_waiting();
      return AbortedError(
          "the engine stopped while this batch waited for its turn to make "
          "NCCL calls");
    }
    const TimePoint now = Clock::now();
    if (now >= deadline) {
      const std::string after = before != nullptr ? Describe(*before) : SetName(holder_);
      stop_waiting();
      return TimeoutError("waited " + Seconds(now - start) + " to make its NCCL calls after " +
                          after +
                          ". NCCL calls of process sets that share ranks are made in the order "
                          "their tensors were submitted: submit them in one order on every rank");
    }
    if (now >= warn_at) {
      if (wait.logger != nullptr) {
        wait.logger->Warning(wait.what() + " has waited " + Seconds(now - start) +
                             " to make its NCCL calls after " +
                             (before != nullptr ? Describe(*before) : SetName(holder_)));
      }
      warn_at = now + wait.warn_every;
    }
    cv_.wait_until(lock.native(), std::min(deadline, warn_at));
  }
  mine.waiting = 0;
  holder_ = set;
  return Turn(this, set, numbers, mark_set_ != set ? mark_ : nullptr);
}

void NcclOrder::LeaveMark(int set, std::shared_ptr<const Mark> mark) {
  MutexLock lock(mu_);
  mark_set_ = set;
  mark_.swap(mark);  // (the old one goes after the lock)
}

void NcclOrder::EndTurn(int set, std::span<const uint64_t> numbers) {
  {
    MutexLock lock(mu_);
    if (holder_ == set) holder_ = kNobody;
    auto it = sets_.find(set);
    if (it != sets_.end()) {
      for (uint64_t n : numbers) it->second.unrun.erase(n);
    }
  }
  cv_.notify_all();
}

void NcclOrder::Cancel(int set) {
  {
    MutexLock lock(mu_);
    sets_[set].cancelled = true;
  }
  cv_.notify_all();
}

void NcclOrder::Forget(int set) {
  {
    MutexLock lock(mu_);
    sets_.erase(set);
  }
  cv_.notify_all();
}

NcclOrder::Turn::Turn(Turn&& o) noexcept
    : order_(std::exchange(o.order_, nullptr)),
      set_(o.set_),
      numbers_(o.numbers_),
      previous_(std::move(o.previous_)) {}

NcclOrder::Turn& NcclOrder::Turn::operator=(Turn&& o) noexcept {
  if (this != &o) {
    End();
    order_ = std::exchange(o.order_, nullptr);
    set_ = o.set_;
    numbers_ = o.numbers_;
    previous_ = std::move(o.previous_);
  }
  return *this;
}

void NcclOrder::Turn::Leave(std::shared_ptr<const Mark> mark) {
  if (order_ != nullptr) order_->LeaveMark(set_, std::move(mark));
}

void NcclOrder::Turn::End() {
  previous_.reset();
  if (order_ != nullptr) std::exchange(order_, nullptr)->EndTurn(set_, numbers_);
}

}  // namespace hora
