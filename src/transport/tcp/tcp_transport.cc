// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/tcp/tcp_transport.h"

#include <sched.h>

#include <cstdio>

#include "transport/heartbeat.h"
#include "transport/tcp/tcp_transport_impl.h"

namespace hora {
namespace tcp_internal {

void TcpTransport::Loop(TimePoint started) {
  epoll_event events[64];
  const Duration every = BeatInterval(peer_timeout_);
  const int wait_ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(every).count());
  TimePoint next_beat = started + every;
  TimePoint next_tick{};
  bool ticking = false;  // some peer is quiet: look every kQuietTickMs (ticking_)
  while (true) {
    const int n = epoll_wait(epoll_.get(), events, 64, ticking ? kQuietTickMs : wait_ms);
    MutexLock lock(mu_);
    if (stop_) return;
    for (int e = 0; e < n; ++e) {
      if (events[e].data.u64 == ~uint64_t{0}) {
        uint64_t drained;
        [[maybe_unused]] ssize_t r = read(wake_.get(), &drained, sizeof drained);
      }
    }
    // Edge-triggered sockets: pump every live peer until it would block
    // (not on a tick's own time-out, but at every beat: Tick reads what
    // needs it).
    if (n != 0 || !ticking || Clock::now() >= next_beat) {
      for (size_t i = 0; i < peers_.size(); ++i) {
        if (peers_[i].fd.valid() && !peers_[i].broken) Pump(i);
      }
    }
    const TimePoint now = Clock::now();
    if (ticking && now >= next_tick) {
      Tick();
      next_tick = now + std::chrono::milliseconds(kQuietTickMs);
    }
    if (!ticking && quiet_peers_ > 0) next_tick = now + std::chrono::milliseconds(kQuietTickMs);
    ticking = quiet_peers_ > 0;
    ticking_ = ticking;
    if (now >= next_beat) {
      // (A round far later than due: this process did not run; heartbeat.h.)
      Beat(now, RoundCameLate(next_beat - every, now, every));
      next_beat = now + every;
    }
  }
}

void TcpTransport::Beat(TimePoint now, bool fresh_start) {
  if (closing_) return;
  for (size_t i = 0; i < peers_.size(); ++i) {
    Peer& p = peers_[i];
    if (!p.fd.valid() || p.broken || p.said_goodbye) continue;
    if (p.bytes_in != p.bytes_in_seen || fresh_start || !watching_) {
      p.bytes_in_seen = p.bytes_in;
      p.in_moved = now;
    } else if (peer_timeout_ > Duration::zero() && now - p.in_moved >= peer_timeout_) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.3g", DurationToSeconds(now - p.in_moved));
      if (lost_.ok()) silent_peer_ = static_cast<int>(i);
      FailPeer(i, std::string("no sign of life from it for ") + secs +
                      " s (HORA_PEER_TIMEOUT_S): its process is stopped (SIGSTOP, a debugger) "
                      "or frozen, or the network between us is cut");
      continue;
    }
    // Nothing went to it since the last round: tell it this rank is alive.
    if (p.sends.empty() && p.frames_out == p.frames_out_seen) {
      p.sends.push_back({{kHeartbeatTag, 0},
                         nullptr,
                         {},
                         0,
                         std::make_shared<RequestState>(true, static_cast<int>(i), 0)});
      WriteSome(i);
    }
    p.frames_out_seen = p.frames_out;
  }
}

bool TcpTransport::Progress() {
  if (!mu_.try_lock()) return false;
  MutexLock lock(mu_, std::adopt_lock);
  if (stop_ || !lost_.ok()) return false;
  const uint64_t before = moved_;
  for (size_t i = 0; i < peers_.size(); ++i) {
    if (peers_[i].fd.valid() && !peers_[i].broken) Pump(i);
  }
  return moved_ != before;
}

bool TcpTransport::Pump(size_t i) { return WriteSome(i) && ReadSome(i); }

bool TcpTransport::WriteSome(size_t i) {
  Peer& p = peers_[i];
  while (!p.sends.empty()) {
    SendOp& op = p.sends.front();
    iovec iov[2];
    int cnt = 0;
    if (op.done < sizeof(Header)) {
      iov[cnt++] = {reinterpret_cast<char*>(&op.header) + op.done, sizeof(Header) - op.done};
    }
    const size_t sent = op.done > sizeof(Header) ? op.done - sizeof(Header) : 0;
    const size_t payload = IsControl(op.header.tag) ? 0 : op.header.bytes;
    if (payload > sent) iov[cnt++] = {const_cast<char*>(op.data) + sent, payload - sent};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(cnt);
    // MSG_NOSIGNAL: a peer that has gone is an error here, not a SIGPIPE.
    ssize_t w = cnt ? sendmsg(p.fd.get(), &msg, MSG_NOSIGNAL) : 0;
    if (w < 0) {
      // Full: the I/O thread writes the rest when it has room.
      if (errno == EAGAIN) {
        if (p.quiet) {
          Unquiet(i);
        } else {
          SetInterest(i, p.events | EPOLLOUT);
        }
      }
      if (errno == EAGAIN || errno == EINTR) return true;
      FailPeer(i, std::strerror(errno));
      return false;
    }
    op.done += static_cast<size_t>(w);
    moved_ += static_cast<uint64_t>(w);
    ++p.frames_out;  // (a part of one counts: the peer hears from this rank)
    if (op.done == sizeof(Header) + payload) {
      op.request->Complete(Status::Ok());
      p.sends.pop_front();
    }
  }
  return true;
}

}  // namespace tcp_internal

Result<std::unique_ptr<Transport>> CreateTcpTransport(Store& store, const TcpMeshOptions& options) {
  const TimePoint deadline = DeadlineAfter(Clock::now(), options.timeout);
  HORA_ASSIGN_OR_RETURN(std::vector<net::Fd> fds, ConnectTcpMesh(store, options));
  auto t = std::make_unique<tcp_internal::TcpTransport>(
      options.rank, std::move(fds), options.wait_spin, options.peer_timeout, options.yield);
  HORA_RETURN_IF_ERROR(t->Start());
  if (options.peer_timeout > Duration::zero() && options.size > 1) {
    // Silence counts once every rank's I/O thread beats: a rank that
    // finished its connections early must not lose one still at them.
    const std::string prefix = options.key_prefix + "/started/";
    HORA_RETURN_IF_ERROR(store.Set(prefix + std::to_string(options.rank), Bytes{1}));
    std::vector<std::string> keys;
    for (int r = 0; r < options.size; ++r) keys.push_back(prefix + std::to_string(r));
    HORA_RETURN_IF_ERROR(
        store.Wait(keys, std::max<Duration>(Duration::zero(), deadline - Clock::now()))
            .WithContext("rank " + std::to_string(options.rank) +
                         ": waiting for every rank's TCP transport to start"));
    t->WatchPeers();
  }
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace hora
