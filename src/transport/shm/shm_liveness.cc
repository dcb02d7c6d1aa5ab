// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Whether the shm transport's peers are alive (docs/dev/design.md §6): a peer whose
// process ended (its pidfd readable, or kill() says it is gone) without
// closing its transport is lost at once; a peer whose heartbeat counter has
// not moved for the peer timeout (stopped, frozen) is lost then. A lost peer
// fails every pending request of this rank, and every later one, naming it.
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "common/process_alive.h"
#include "transport/heartbeat.h"
#include "transport/shm/shm_transport.h"
#include "transport/shm/shm_transport_impl.h"

namespace hora {
namespace {

using Sink = ShmTransport::Link::Sink;

}  // namespace

void ShmTransport::WatchPeerProcess(int peer, int pid) {
  Link& l = link(peer);
  l.peer_pid = pid;
  if (pid <= 0 || pid == static_cast<int>(getpid())) return;
  // A pidfd turns readable once the process has ended, also while it is a
  // zombie that nobody reaped yet (kill() still finds a zombie); where the
  // kernel has none, kill() is the fallback.
  const long fd = syscall(SYS_pidfd_open, pid, 0);
  if (fd >= 0) l.pidfd.Reset(static_cast<int>(fd));
}

bool ShmTransport::ProcessEnded(const Link& l) {
  if (l.pidfd.valid()) {
    pollfd p{l.pidfd.get(), POLLIN, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
  }
  return !ProcessRuns(l.peer_pid);
}

bool ShmTransport::SessionEnded(const Link& l) {
  return l.in.broken() == kShmBrokenClosed ||
         (l.window_segment.mapped() && ShmWindowSegment::Closed(l.window_segment.data()));
}

bool ShmTransport::LivenessDue() {
  const int64_t now_ns =
      std::chrono::duration_cast<Duration>(Clock::now().time_since_epoch()).count();
  int64_t last = last_liveness_ns_.load(std::memory_order_relaxed);
  return now_ns - last >= kShmLivenessEvery.count() &&
         last_liveness_ns_.compare_exchange_strong(last, now_ns);
}

Status ShmTransport::PeerGone(int peer) {
  if (LivenessDue()) CheckPeersAlive();
  MutexLock lock(mu_);
  if (!lost_.ok()) return lost_;
  if (peer == rank_) return Status::Ok();
  const Link& l = link(peer);
  // Its channel to us says closed, unless a cancelled send marked it first;
  // its window segment says so either way.
  if (SessionEnded(l)) {
    return UnavailableError(Name(peer) + " closed its shm transport (its session ended)");
  }
  return Status::Ok();
}

bool ShmTransport::CheckPeersAlive() {
  MutexLock lock(mu_);
  if (!lost_.ok()) return false;
  const int me = static_cast<int>(getpid());
  for (int p = 0; p < size_; ++p) {
    Link* l = links_[static_cast<size_t>(p)].get();
    if (l == nullptr || l->peer_pid <= 0 || l->peer_pid == me) continue;
    if (SessionEnded(*l)) continue;  // it closed its session: not lost
    if (!ProcessEnded(*l)) continue;
    MarkLostLocked(UnavailableError(Name(p) + " (pid " + std::to_string(l->peer_pid) +
                                    ") is gone: its process ended without closing its session"));
    return true;
  }
  return false;
}

void ShmTransport::MarkLostLocked(Status why) {
  lost_ = std::move(why);
  for (auto& link : links_) {
    if (!link) continue;
    // A healthy receiver may still read a direct send this rank now fails
    // (its caller may then free the buffer): it must see the break.
    if (link->out_segment.mapped() && !LeavesChannelWhole(*link)) {
      link->out.MarkBroken(kShmBrokenCancelled);
      link->bell.Ring();
    }
    for (auto& snd : link->sends) snd.request->Complete(lost_);
    link->sends.clear();
    for (auto& rcv : link->posted) rcv.request->Complete(lost_);
    link->posted.clear();
    if (link->current.sink == Sink::kRecv) link->current.recv.request->Complete(lost_);
  }
  // This rank's own sleepers (a waiter, a window step) wake and see it.
  own_bell_.Ring();
}

void ShmTransport::StartHeartbeat(Duration peer_timeout) {
  peer_timeout_ = peer_timeout;
  const TimePoint now = Clock::now();
  for (auto& l : links_) {
    if (l) l->beat_changed = now;
  }
  beat_thread_ = std::thread([this, now] {
    NameThisThread("hora-shm-beat");
    HeartbeatLoop(now);
  });
}

void ShmTransport::StopHeartbeat() {
  {
    MutexLock lock(beat_mu_);
    beat_stop_ = true;
  }
  beat_cv_.notify_all();
  if (beat_thread_.joinable()) beat_thread_.join();
}

void ShmTransport::HeartbeatLoop(TimePoint started) {
  const Duration every = BeatInterval(peer_timeout_);
  // (From when silences began to count: a first round that comes late, the
  // process stopped before this thread ran, is late like any other.)
  TimePoint last = started;
  for (Duration wait = Duration::zero();; wait = every) {  // the first round at once
    {
      MutexLock lock(beat_mu_);
      // (The predicate runs with beat_mu_ held, where the analysis cannot see it.)
      if (beat_cv_.wait_for(lock.native(), wait,
                            [&]() HORA_NO_THREAD_SAFETY_ANALYSIS { return beat_stop_; })) {
        return;
      }
    }
    ShmWindowSegment::Beat(own_window_segment_.data());
    CheckPeersAlive();  // so that a rank that waits for nothing learns of a loss too
    const TimePoint now = Clock::now();
    if (peer_timeout_ > Duration::zero()) CheckHeartbeats(now, RoundCameLate(last, now, every));
    last = now;
  }
}

void ShmTransport::CheckHeartbeats(TimePoint now, bool fresh_start) {
  MutexLock lock(mu_);
  if (!lost_.ok()) return;
  if (fresh_start) {  // this process did not run for a while (heartbeat.h)
    for (auto& l : links_) {
      if (l) l->beat_changed = now;
    }
    return;
  }
  const int me = static_cast<int>(getpid());
  for (int p = 0; p < size_; ++p) {
    Link* l = links_[static_cast<size_t>(p)].get();
    // (Ranks as threads of this process cannot stop alone.)
    if (l == nullptr || !l->window_segment.mapped() || l->peer_pid == me) continue;
    if (SessionEnded(*l)) continue;
    const uint64_t beat = ShmWindowSegment::Heartbeat(l->window_segment.data());
    if (beat != l->beat_seen) {
      l->beat_seen = beat;
      l->beat_changed = now;
      continue;
    }
    if (now - l->beat_changed < peer_timeout_) continue;
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.3g", DurationToSeconds(now - l->beat_changed));
    const std::string pid = l->peer_pid > 0 ? " (pid " + std::to_string(l->peer_pid) + ")" : "";
    silent_peer_ = p;
    MarkLostLocked(UnavailableError(
        Name(p) + pid + " has shown no sign of life for " + secs +
        " s (HORA_PEER_TIMEOUT_S): its process is stopped (SIGSTOP, a debugger) or frozen"));
    return;
  }
}

}  // namespace hora
