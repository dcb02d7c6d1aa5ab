// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The host device's NCCL (host_nccl.h): where the ranks of a communicator
// meet -- the rounds of its collectives, its point-to-point mail, and its
// aborts, the communicator's or one rank's.
//
// Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "hora/status.h"

namespace hora::host_nccl {

// A rank's way to the others of its communicator: the Hub itself, where
// the rank is in the process that made the id, or a link to it from
// another process (host_nccl_remote.h). The same calls either way; a link
// may also fail with the connection.
class Meeting {
 public:
  virtual ~Meeting() = default;
  // Round `seq`: puts this rank's bytes there, waits (until `deadline`) for
  // every rank's, then fn(every rank's bytes).
  virtual Status Meet(
      uint64_t seq, int rank, std::vector<std::byte> mine, TimePoint deadline,
      const std::function<void(const std::vector<std::vector<std::byte>>&)>& fn) = 0;
  // Point to point: `from`'s bytes for `to`, kept in order until taken.
  virtual Status Post(int from, int to, std::vector<std::byte> bytes) = 0;
  virtual Result<std::vector<std::byte>> Take(int from, int to, TimePoint deadline) = 0;
  // Ends every rank's waits with `why`.
  virtual void Abort(const std::string& why) = 0;
  // Ends `rank`'s waits only, with `why` (the first said), as an abort of
  // NCCL's ends that rank's kernels and not the others'.
  virtual void End(int rank, const Status& why) = 0;
  // Why `rank`'s waits end (OK: they go on).
  virtual Status ended(int rank) = 0;
};

// Where the ranks of one communicator meet. Alive until every rank that
// init from its id has let go (it holds itself until the last one came;
// its server holds it for each rank of another process until that one
// leaves: host_nccl_remote.h).
class Hub final : public Meeting {
 public:
  // Joins as one of `size` ranks; the hub then lives while the caller holds it.
  Status Join(int size, std::shared_ptr<Hub>* held) HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (size_ == 0) size_ = size;
    if (size != size_) {
      return InvalidArgument("host NCCL: init as one of " + std::to_string(size) +
                             " ranks, but the first rank said " + std::to_string(size_));
    }
    *held = self_;
    if (++joined_ == size_) self_.reset();  // (every rank holds it now)
    return Status::Ok();
  }
  void Keep(std::shared_ptr<Hub> self) HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    self_ = std::move(self);
  }
  // The number of ranks (0 until the first joined).
  int size() HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return size_;
  }

  Status Meet(uint64_t seq, int rank, std::vector<std::byte> mine, TimePoint deadline,
              const std::function<void(const std::vector<std::vector<std::byte>>&)>& fn) override
      HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    Round& round = rounds_[seq];
    round.data.resize(static_cast<size_t>(size_));
    round.data[static_cast<size_t>(rank)] = std::move(mine);
    ++round.arrived;
    cv_.notify_all();
    while (round.arrived < size_ && Ended(rank).ok()) {
      if (cv_.wait_until(lock.native(), deadline) == std::cv_status::timeout &&
          round.arrived < size_) {
        aborted_ = TimeoutError("host NCCL: timed out waiting for " +
                                std::to_string(size_ - round.arrived) + " rank(s) in call " +
                                std::to_string(seq));
        cv_.notify_all();
      }
    }
    HORA_RETURN_IF_ERROR(Ended(rank));
    fn(round.data);  // (no rank changes the round until every rank left it)
    if (++round.left == size_) rounds_.erase(seq);
    return Status::Ok();
  }

  Status Post(int from, int to, std::vector<std::byte> bytes) override HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    mail_[{from, to}].push_back(std::move(bytes));
    cv_.notify_all();
    return Status::Ok();
  }
  Result<std::vector<std::byte>> Take(int from, int to, TimePoint deadline) override
      HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    std::deque<std::vector<std::byte>>& box = mail_[{from, to}];
    while (box.empty() && Ended(to).ok()) {
      if (cv_.wait_until(lock.native(), deadline) == std::cv_status::timeout && box.empty()) {
        aborted_ =
            TimeoutError("host NCCL: rank " + std::to_string(to) +
                         " timed out waiting for what rank " + std::to_string(from) + " sends");
        cv_.notify_all();
      }
    }
    HORA_RETURN_IF_ERROR(Ended(to));
    std::vector<std::byte> bytes = std::move(box.front());
    box.pop_front();
    return bytes;
  }

  void Abort(const std::string& why) override HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (aborted_.ok()) aborted_ = AbortedError("host NCCL: the communicator was aborted: " + why);
    cv_.notify_all();
  }
  void End(int rank, const Status& why) override HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    own_.emplace(rank, why);
    cv_.notify_all();
  }
  Status ended(int rank) override HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return Ended(rank);
  }

 private:
  struct Round {
    std::vector<std::vector<std::byte>> data;
    int arrived = 0;
    int left = 0;
  };
  Mutex mu_;
  std::condition_variable cv_;
  int size_ HORA_GUARDED_BY(mu_) = 0;
  int joined_ HORA_GUARDED_BY(mu_) = 0;
  std::shared_ptr<Hub> self_ HORA_GUARDED_BY(mu_);
  std::map<uint64_t, Round> rounds_ HORA_GUARDED_BY(mu_);
  std::map<std::pair<int, int>, std::deque<std::vector<std::byte>>> mail_ HORA_GUARDED_BY(mu_);
  Status Ended(int rank) const HORA_REQUIRES(mu_) {
    if (!aborted_.ok()) return aborted_;
    const auto it = own_.find(rank);
    return it == own_.end() ? Status::Ok() : it->second;
  }

  Status aborted_ HORA_GUARDED_BY(mu_);
  std::map<int, Status> own_ HORA_GUARDED_BY(mu_);  // End's
};

}  // namespace hora::host_nccl
