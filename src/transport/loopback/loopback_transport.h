// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Loopback transport: ranks are threads of one process. A LoopbackHub holds
// one mailbox per rank; a message is copied once, straight from the sender's
// buffer into the receiver's, by whichever side arrives second (rendezvous:
// no intermediate buffer, and a send completes when it has been received).
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "common/mutex.h"
#include "transport/loopback/loopback_window.h"
#include "transport/transport.h"

namespace hora {

class LoopbackHub : public std::enable_shared_from_this<LoopbackHub> {
 public:
  static std::shared_ptr<LoopbackHub> Create(int size);

  int size() const { return static_cast<int>(mailboxes_.size()); }

  // The transport endpoint of `rank`. One per rank; it keeps the hub alive.
  std::unique_ptr<Transport> Connect(int rank) HORA_EXCLUDES(windows_mu_);
  // The same, or null while `rank` has an endpoint not yet closed (a second
  // Session for one rank of a ThreadWorld). A rank that has not connected as
  // often as this one `absent_after` after it did (a ThreadWorld rank that
  // made no Session) is lost to this endpoint alone: its LostPeer() names it
  // from then on, so that what this rank waits in fails (zero: never).
  std::unique_ptr<Transport> ConnectIfFree(int rank, Duration absent_after = Duration::zero())
      HORA_EXCLUDES(windows_mu_);

  // Internal to the loopback transport.
  struct Pending {
    int src;
    Tag tag;
    void* recv_buf;        // for posted receives
    const void* send_buf;  // for unexpected sends
    size_t bytes;
    Request request;
    std::optional<ReduceSpec> reduce;  // receives: fold into recv_buf instead of copying
  };
  struct Mailbox {
    Mutex mu;
    std::deque<Pending> posted_recvs HORA_GUARDED_BY(mu);
    std::deque<Pending> unexpected_sends HORA_GUARDED_BY(mu);
  };
  Mailbox& mailbox(int rank) { return *mailboxes_[static_cast<size_t>(rank)]; }
  // Windows. A rank may connect more than once (a ThreadWorld that serves
  // one session after another): its g-th transport shares windows with the
  // other ranks' g-th ones (`generation` g, counted from 1). This assumes
  // every rank connects once per session and closes its transports in
  // order, as ThreadWorld sessions do; a rank whose generation differs from
  // the others' fails its window steps (Timeout, or "closed") and its
  // collectives then run the point-to-point algorithms.
  // The window of `context` (< kSharedWindowContexts) for `generation`,
  // made by the first rank that asks for it: the hub's ranks' (`group`
  // kAllRanks), or those of a group of `size` of them (a process set,
  // GroupWindows; `group` its key).
  static constexpr uint64_t kAllRanks = ~uint64_t{0};
  std::shared_ptr<LoopbackWindowGroup> WindowGroup(uint32_t context, int generation,
                                                   uint64_t group = kAllRanks, int size = 0)
      HORA_EXCLUDES(windows_mu_);
  // A rank that has connected fewer than `generation` times, or -1.
  int FirstAbsent(int generation) const;
  // How many of rank k's transports have closed.
  int closed(int k) const {
    return closed_[static_cast<size_t>(k)].load(std::memory_order_acquire);
  }
  // Counts a transport of `rank` closed and wakes every rank waiting in a
  // window step.
  void Close(int rank) HORA_EXCLUDES(windows_mu_);
  // Tests' stand-in for a rank whose process ended, as TCP's transport
  // takes it: from now on every rank's LostPeer() names `rank`, and every
  // message pending or posted after fails with that (the lost rank's own
  // included: its thread goes on, but meets nobody).
  void Lose(int rank) HORA_EXCLUDES(lost_mu_);
  Status lost() const HORA_EXCLUDES(lost_mu_);
  bool any_lost() const { return any_lost_.load(std::memory_order_acquire); }

 private:
  explicit LoopbackHub(int size);
  std::vector<std::unique_ptr<Mailbox>> mailboxes_;
  std::unique_ptr<std::atomic<int>[]> closed_;
  mutable Mutex lost_mu_;
  Status lost_ HORA_GUARDED_BY(lost_mu_);  // Lose's
  std::atomic<bool> any_lost_{false};
  Mutex windows_mu_;
  // Per rank; changed under windows_mu_, read by FirstAbsent without it.
  std::unique_ptr<std::atomic<int>[]> connections_;
  // By (group, context, generation).
  std::map<std::tuple<uint64_t, uint32_t, int>, std::weak_ptr<LoopbackWindowGroup>> windows_
      HORA_GUARDED_BY(windows_mu_);
};

}  // namespace hora
