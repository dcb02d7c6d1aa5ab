// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// How a rank waits on a TCP request of up to kTcpSpinBytes (4 MiB; the I/O
// thread moves larger ones), and quiet peers: the waiter moves its peer's
// socket itself while it spins, and meanwhile the peer is quiet (its
// arrivals do not wake the I/O thread, which looks at quiet peers every
// kQuietTickMs and takes back those no waiter read). An I/O thread woken by
// each arrival cost a bare exchange 4-7 us of 7 (docs/dev/performance.md).
#include <sched.h>

#include "transport/tcp/tcp_transport_impl.h"

namespace hora::tcp_internal {

Status TcpTransport::Wait(const Request& request, TimePoint deadline) {
  return WaitAlso(request, deadline, nullptr);
}

Status TcpTransport::WaitAlso(const Request& request, TimePoint deadline,
                              const std::function<bool()>& also) {
  const auto peer = static_cast<size_t>(request->peer());
  const bool known = peer < static_cast<size_t>(size_);  // (else done: an invalid peer's error)
  // The largest transfers are the I/O thread's (kTcpSpinBytes): the waiter
  // sleeps through them.
  if (request->bytes() <= kTcpSpinBytes) {
    constexpr uint32_t kClockEvery = 16;  // a clock read costs about one recv attempt
    TimePoint spin_until = Clock::now() + spin_;
    bool moved = false;
    for (uint32_t round = 1; !request->done(); ++round) {
      bool busy = false;  // another thread holds the lock: let it run
      moved |= ProgressPeer(request, &busy);
      if (also && also()) moved = true;
      if (busy || yield_) {
        sched_yield();
      } else if (round % kClockEvery != 0) {
        CpuRelax();
        continue;
      }
      const TimePoint now = Clock::now();
      if (moved) spin_until = now + spin_;
      moved = false;
      if (now >= spin_until || now >= deadline) break;
    }
  }
  if (known && !request->done()) {  // (it sleeps: the I/O thread reads from here on)
    MutexLock lock(mu_);
    Unquiet(peer);
  }
  return also ? Transport::WaitAlso(request, deadline, also) : request->Wait(deadline);
}

bool TcpTransport::ProgressPeer(const Request& request, bool* busy) {
  const auto peer = static_cast<size_t>(request->peer());
  if (!mu_.try_lock()) {
    *busy = true;
    return false;
  }
  MutexLock lock(mu_, std::adopt_lock);
  if (stop_ || !lost_.ok() || peer >= peers_.size()) return false;
  const uint64_t before = moved_;
  Peer& p = peers_[peer];
  if (p.fd.valid() && !p.broken) Pump(peer);
  p.touched = true;
  if (!request->done()) Quiet(peer);
  return moved_ != before;
}

void TcpTransport::Tick() {
  for (size_t i = 0; i < peers_.size(); ++i) {
    Peer& p = peers_[i];
    if (!p.quiet) continue;
    if (p.touched) {
      p.touched = false;
      continue;
    }
    Unquiet(i);
    if (p.fd.valid() && !p.broken) Pump(i);
  }
}

void TcpTransport::Quiet(size_t i) {
  Peer& p = peers_[i];
  if (p.quiet || p.broken || !p.fd.valid() || !p.sends.empty() || BulkInbound(p)) return;
  if (!SetInterest(i, kQuietPeerEvents)) return;
  p.quiet = true;
  ++quiet_turns_;
  // (The first quiet peer: the I/O thread starts its ticks, unless it ticks already.)
  if (quiet_peers_++ == 0 && !ticking_) Wake();
}

void TcpTransport::Unquiet(size_t i) {
  Peer& p = peers_[i];
  // (Room to write only while sends wait: a writable socket would wake
  // the I/O thread at once for nothing.)
  const uint32_t events = kPeerEvents | (p.sends.empty() ? 0u : uint32_t{EPOLLOUT});
  if (!p.quiet || !SetInterest(i, events)) return;  // (failed: a later tick tries again)
  p.quiet = false;
  --quiet_peers_;
}

bool TcpTransport::BulkInbound(const Peer& p) {
  if (p.in_payload && p.in_header.bytes > kTcpSpinBytes) return true;
  return std::any_of(p.posted.begin(), p.posted.end(),
                     [](const RecvOp& op) { return op.bytes > kTcpSpinBytes; });
}

bool TcpTransport::SetInterest(size_t i, uint32_t events) {
  Peer& p = peers_[i];
  if (p.events == events) return true;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = i;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, p.fd.get(), &ev) != 0) return false;
  p.events = events;
  return true;
}

}  // namespace hora::tcp_internal
