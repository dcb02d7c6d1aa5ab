// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The TCP transport's internals (tcp_transport.h has the contract): wire
// frames, per-peer state, and the class (setup, posting and cancelling
// inline). tcp_transport.cc holds the I/O thread's loop, liveness, writing
// and CreateTcpTransport; tcp_receive.cc reads and matches
// incoming messages; tcp_wait.cc is how a waiter waits, and quiet peers;
// tcp_loss.cc a lost or closing peer.
#pragma once

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>
#include <thread>

#include "common/mutex.h"
#include "common/thread_name.h"
#include "common/units.h"
#include "transport/buffer_pool.h"
#include "transport/tag_layout.h"
#include "transport/tcp/tcp_transport.h"

namespace hora::tcp_internal {

struct Header {
  uint64_t tag;
  uint64_t bytes;
};

inline constexpr size_t kStageBytes = 256 * 1024;
// Requests larger than this are waited for without spinning: the I/O thread
// moves them. Up to it, a waiter moves its peer's socket itself (Wait): the
// ring's 256 KiB segments and halving-doubling's halves of messages up to
// 8 MiB. At 64 KiB, every such request cost a wake of the I/O thread and one
// of the waiter: np 2 allreduce of 256 KiB took 154-187 us against Open
// MPI's 77, and 57 us at this bound (docs/dev/performance.md, session 58).
inline constexpr size_t kTcpSpinBytes = 4 * 1024 * 1024;
// A frame with this tag is not a message: it tells the receiver that the
// sender lost its connection to rank `bytes`, so every rank learns which rank
// was lost, not only that rank's neighbours.
inline constexpr uint64_t kLostPeerTag = ~uint64_t{0};
// A frame with this tag says the sender is closing its session on purpose:
// the end of its stream that follows is not a lost rank.
inline constexpr uint64_t kGoodbyeTag = ~uint64_t{0} - 1;
// A frame with this tag says only that the sender is alive.
inline constexpr uint64_t kHeartbeatTag = ~uint64_t{0} - 2;

inline bool IsControl(uint64_t tag) { return tag >= kHeartbeatTag; }

// The I/O thread's epoll interest in a peer's socket: arrivals, and room to
// write while sends are queued (Peer::events). While the peer is quiet
// (Peer::quiet), only a hang-up or an error (a write that finds the socket
// full gives the peer back, WriteSome).
inline constexpr uint32_t kPeerEvents = EPOLLIN | EPOLLET;
inline constexpr uint32_t kQuietPeerEvents = EPOLLET;
// How often the I/O thread looks at quiet peers (Loop), in milliseconds: the
// longest a message on a quiet peer waits when no waiter reads it (a wait
// on it reads it at once). At 1 ms the ticks, each a wake-up on a core a
// spinning rank held, made 1-2% of 4-byte allreduces at np 2 take 5-10x
// the median (docs/dev/performance.md, session 58).
inline constexpr int kQuietTickMs = 10;
// Where the ranks on this host outnumber its cores, a waiter that yields
// between its looks polls at least this long before it sleeps (unless told
// not to spin at all): the peer it waits for is often queued behind the
// other spinning ranks, and a sleep costs the wake through the I/O thread.
// At np 4 on 2 cores, 200 us instead of 50 took the 4-byte p99 from 2.8-4x
// the p50 to 2.2-2.7x (docs/dev/performance.md, session 58).
inline constexpr Duration kOversubscribedSpin = std::chrono::microseconds(200);

struct SendOp {
  Header header;
  const char* data;
  std::vector<char> owned;  // set when a cancelled send's rest was copied
  size_t done = 0;          // bytes of header + payload written
  Request request;
};

struct RecvOp {
  Tag tag;
  char* data;
  size_t bytes;
  std::optional<ReduceSpec> reduce;
  Request request;
};

struct Unexpected {
  Tag tag;
  PooledBuffer payload;
};

struct Peer {
  net::Fd fd;
  bool broken = false;
  bool said_goodbye = false;  // the peer closes on purpose
  bool at_eof = false;        // its stream has ended
  std::string broken_reason;
  std::deque<SendOp> sends;
  std::deque<RecvOp> posted;
  std::deque<Unexpected> unexpected;
  // Incoming message state.
  Header in_header{};
  size_t in_header_done = 0;
  bool in_payload = false;
  size_t in_done = 0;
  std::optional<RecvOp> in_target;  // matched receive, if any
  PooledBuffer in_unexpected;       // otherwise the payload lands here (from pool_)
  bool in_discard = false;          // the matched receive was cancelled
  std::vector<char> stage;          // IrecvReduce staging
  // Quiet: waiters are reading this socket themselves (Wait), so arrivals
  // do not wake the I/O thread (kQuietPeerEvents); it gives the interest
  // back once a tick passes in which no waiter read (`touched`), and a wait
  // that will sleep gives it back first.
  bool quiet = false;
  bool touched = false;
  uint32_t events = kPeerEvents | EPOLLOUT;  // the interest registered (Start)
  // Liveness (the I/O thread's Beat): bytes read from and frames written to
  // the peer so far, as last seen by Beat, and when reading last moved.
  uint64_t bytes_in = 0, frames_out = 0;
  uint64_t bytes_in_seen = 0, frames_out_seen = 0;
  TimePoint in_moved{};
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(int rank, std::vector<net::Fd> fds, Duration spin, Duration peer_timeout,
               bool yield = false)
      : rank_(rank),
        size_(static_cast<int>(fds.size())),
        spin_(yield && spin > Duration::zero() ? std::max(spin, kOversubscribedSpin) : spin),
        peer_timeout_(peer_timeout),
        yield_(yield),
        peers_(fds.size()) {
    for (size_t i = 0; i < fds.size(); ++i) peers_[i].fd = std::move(fds[i]);
  }

  Status Start() HORA_EXCLUDES(mu_) {
    epoll_ = net::Fd(epoll_create1(EPOLL_CLOEXEC));
    wake_ = net::Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!epoll_.valid() || !wake_.valid())
      return InternalError(std::string("epoll: ") + std::strerror(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = ~uint64_t{0};
    epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
    const TimePoint now = Clock::now();
    {
      MutexLock lock(mu_);  // (no other thread yet, but peers_ is the lock's)
      for (size_t i = 0; i < peers_.size(); ++i) {
        if (!peers_[i].fd.valid()) continue;
        peers_[i].in_moved = now;
        HORA_RETURN_IF_ERROR(net::SetNonBlocking(peers_[i].fd.get(), true));
        ev.events = peers_[i].events;
        ev.data.u64 = i;
        epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, peers_[i].fd.get(), &ev);
      }
    }
    thread_ = std::thread([this, now] {
      NameThisThread("hora-tcp");
      Loop(now);
    });
    return Status::Ok();
  }

  ~TcpTransport() override {
    // Orderly close: queue a goodbye to every peer, let queued frames leave,
    // half-close, and read until each peer's stream ends, so that no unread
    // byte turns our close into a reset that could destroy data in flight.
    // Peers slow to close are not lost meanwhile (closing_).
    {
      MutexLock lock(mu_);
      closing_ = true;
      for (size_t j = 0; j < peers_.size(); ++j) {
        if (!peers_[j].fd.valid() || peers_[j].broken) continue;
        peers_[j].sends.push_back({{kGoodbyeTag, 0},
                                   nullptr,
                                   {},
                                   0,
                                   std::make_shared<RequestState>(true, static_cast<int>(j), 0)});
      }
    }
    auto wait_until = [&](auto done, std::chrono::milliseconds limit) {
      for (auto until = Clock::now() + limit; Clock::now() < until;) {
        {
          MutexLock lock(mu_);
          if (done()) return;
        }
        Wake();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    };
    wait_until(
        [&]() HORA_REQUIRES(mu_) {
          for (const Peer& p : peers_) {
            if (!p.sends.empty() && !p.broken) return false;
          }
          return true;
        },
        std::chrono::milliseconds(2000));
    {
      MutexLock lock(mu_);
      for (Peer& p : peers_) {
        if (p.fd.valid()) shutdown(p.fd.get(), SHUT_WR);
      }
    }
    wait_until(
        [&]() HORA_REQUIRES(mu_) {
          for (const Peer& p : peers_) {
            if (p.fd.valid() && !p.at_eof && !p.broken) return false;
          }
          return true;
        },
        std::chrono::milliseconds(2000));
    {
      MutexLock lock(mu_);
      stop_ = true;
    }
    Wake();
    if (thread_.joinable()) thread_.join();
    MutexLock lock(mu_);
    FailAllPending(AbortedError("transport shut down"));
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "tcp"; }

  Request Isend(int peer, Tag tag, const void* data, size_t bytes) override HORA_EXCLUDES(mu_) {
    auto req = std::make_shared<RequestState>(true, peer, bytes);
    MutexLock lock(mu_);
    if (!Usable(peer, req)) return req;
    Peer& p = peers_[static_cast<size_t>(peer)];
    p.sends.push_back({{tag, bytes}, static_cast<const char*>(data), {}, 0, req});
    // With nothing ahead of it, write now from this thread (no hop to the
    // I/O thread for a small message); what does not fit goes on later.
    if (p.sends.size() == 1) WriteSome(static_cast<size_t>(peer));
    if (!p.sends.empty()) Wake();
    return req;
  }

  // Waits for a request of up to kTcpSpinBytes by moving its peer's socket
  // from this thread for up to spin_ after the last byte moved (a reply from a peer that is also
  // running arrives within it without the hop through the I/O thread and a futex wake, two context
  // switches a side), then sleeps until the I/O thread completes the request. Bounded by
  // `deadline`. Where the ranks on this host outnumber its cores (yield_), it yields the core
  // after each look: the peer it waits for may be queued on it (2x faster at np 4 on 2 cores);
  // and it polls for kOversubscribedSpin at least.
  // Meanwhile its peer turns quiet (Peer::quiet) and stays so while waits keep reading it: an I/O
  // thread woken by each arrival cost a bare exchange 4-7 us of 7 (docs/dev/performance.md).
  Status Wait(const Request& request, TimePoint deadline) override;
  // The same, calling `also` at each look and, once asleep, every 200 us
  // (Transport::WaitAlso): shared memory's progress, for HybridTransport.
  Status WaitAlso(const Request& request, TimePoint deadline,
                  const std::function<bool()>& also) override;
  // Once every rank's transport has started (its I/O thread beats): from
  // here on a silent peer is lost. Before, a peer still connecting to the
  // rest of the mesh would be silent, not lost.
  void WatchPeers() HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    watching_ = true;
  }

  // Reads and writes every live peer from the calling thread unless another
  // thread is at it; whether any byte moved.
  bool Progress() override HORA_EXCLUDES(mu_);
  Status LostPeer() override HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return lost_;
  }
  int SilentPeer() override HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return silent_peer_;
  }
  // How many peers are quiet now, and how many times one turned quiet (for
  // tests).
  int QuietPeers() HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return quiet_peers_;
  }
  uint64_t QuietTurns() HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return quiet_turns_;
  }

  Request Irecv(int peer, Tag tag, void* data, size_t bytes) override {
    return Post(peer, tag, data, bytes, std::nullopt);
  }

  Request IrecvReduce(int peer, Tag tag, void* dst, size_t count, const ReduceSpec& spec) override {
    return Post(peer, tag, dst, count * DataTypeSize(spec.dtype), spec);
  }

  void Cancel(const Request& request) override HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (request->done() || request->peer() < 0 || request->peer() >= size()) return;
    Peer& p = peers_[static_cast<size_t>(request->peer())];
    const Status aborted = AbortedError("cancelled " + request->Describe());
    if (request->is_send()) {
      for (auto it = p.sends.begin(); it != p.sends.end(); ++it) {
        if (it->request != request) continue;
        if (it->done == 0) {
          p.sends.erase(it);
        } else if (it->owned.empty()) {  // half written: keep the stream whole
          const size_t sent = it->done > sizeof(Header) ? it->done - sizeof(Header) : 0;
          it->owned.assign(it->data + sent, it->data + it->header.bytes);
          it->data = it->owned.data() - sent;
        }
        break;
      }
    } else {
      for (auto it = p.posted.begin(); it != p.posted.end(); ++it) {
        if (it->request == request) {
          p.posted.erase(it);
          break;
        }
      }
      if (p.in_target && p.in_target->request == request) p.in_discard = true;
    }
    request->Complete(aborted);
  }

 private:
  Request Post(int peer, Tag tag, void* data, size_t bytes, std::optional<ReduceSpec> reduce)
      HORA_EXCLUDES(mu_) {
    auto req = std::make_shared<RequestState>(false, peer, bytes);
    RecvOp op{tag, static_cast<char*>(data), bytes, reduce, req};
    Unexpected msg{};
    {
      MutexLock lock(mu_);
      if (peer < 0 || peer >= size() || peer == rank_) {
        Usable(peer, req);
        return req;
      }
      if (!lost_.ok()) {
        req->Complete(lost_);
        return req;
      }
      Peer& p = peers_[static_cast<size_t>(peer)];
      auto it = std::find_if(p.unexpected.begin(), p.unexpected.end(),
                             [tag](const Unexpected& u) { return u.tag == tag; });
      if (it == p.unexpected.end()) {
        if (Usable(peer, req)) {
          if (bytes > kTcpSpinBytes) Unquiet(static_cast<size_t>(peer));  // (the I/O thread's)
          p.posted.push_back(std::move(op));
        }
        return req;
      }
      msg = std::move(*it);
      p.unexpected.erase(it);
    }
    // (Delivered without the lock: the other threads need not wait for a copy.)
    Finish(op, reinterpret_cast<const char*>(msg.payload.data.get()), msg.payload.bytes);
    MutexLock lock(mu_);
    pool_.Give(std::move(msg.payload));
    return req;
  }

  // Delivers a complete payload held elsewhere (unexpected messages).
  static void Finish(const RecvOp& op, const char* payload, size_t n) {
    if (n != op.bytes) {
      op.request->Complete(SizeMismatch(op, n));
      return;
    }
    if (n > 0 && op.reduce) {
      op.reduce->reduce(op.reduce->dtype, op.reduce->op, op.data, payload,
                        n / DataTypeSize(op.reduce->dtype));
    } else if (n > 0) {
      std::memcpy(op.data, payload, n);
    }
    op.request->Complete(Status::Ok());
  }

  static Status SizeMismatch(const RecvOp& op, size_t got) {
    return InvalidArgument("message size mismatch: rank " + std::to_string(op.request->peer()) +
                           " sent " + ExactBytes(got) + " but " + ExactBytes(op.bytes) +
                           " were expected (" + tag_layout::Describe(op.tag) + ")");
  }

  bool Usable(int peer, const Request& req) HORA_REQUIRES(mu_) {
    if (peer < 0 || peer >= size() || peer == rank_) {
      req->Complete(InvalidPeerError(rank_, peer, size()));
      return false;
    }
    if (!lost_.ok()) {
      req->Complete(lost_);
      return false;
    }
    const Peer& p = peers_[static_cast<size_t>(peer)];
    if (p.broken) {
      req->Complete(UnavailableError("connection to rank " + std::to_string(peer) +
                                     " lost: " + p.broken_reason));
      return false;
    }
    return true;
  }

  void Wake() {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t w = write(wake_.get(), &one, sizeof one);
  }

  // Peer i's arrivals stop waking the I/O thread (a waiter reads them),
  // unless a large message from it is expected (that is the I/O thread's
  // to read) or sends to it wait for room.
  void Quiet(size_t i) HORA_REQUIRES(mu_);
  // Peer i's arrivals wake the I/O thread again; epoll reports at once
  // what arrived while it was quiet.
  void Unquiet(size_t i) HORA_REQUIRES(mu_);
  // Sets the I/O thread's interest in peer i's socket (Peer::events).
  bool SetInterest(size_t i, uint32_t events) HORA_REQUIRES(mu_);
  static bool BulkInbound(const Peer& p);

  // Peer i's connection died: fail everything pending with any peer, tell
  // the other peers which rank was lost, and refuse later requests. A job
  // cannot go on without a rank. (Unless it said goodbye first: then, as
  // at the end of its stream, only the requests with it fail.)
  void FailPeer(size_t i, const std::string& why) HORA_REQUIRES(mu_);

  // Another rank reported that it lost `lost`.
  void PeerReportedLoss(size_t reporter, uint64_t lost) HORA_REQUIRES(mu_);

  void FailAllPending(const Status& st) HORA_REQUIRES(mu_);

  // Peer i's stream ended. After a goodbye that is an orderly close: only
  // requests with that peer fail (they can never complete). Otherwise the
  // rank was lost. Returns false (stop reading this peer).
  bool PeerEnded(size_t i) HORA_REQUIRES(mu_);

  // The I/O thread; `started`: when silences began to count (Start).
  void Loop(TimePoint started) HORA_EXCLUDES(mu_);
  // The I/O thread's look at quiet peers, every kQuietTickMs while there
  // are any: a peer no waiter read since the last look is given back.
  void Tick() HORA_REQUIRES(mu_);
  // The I/O thread's liveness round (see tcp_transport.h): heartbeats to
  // peers sent nothing lately, silent peers lost; with `fresh_start` (the round came late,
  // heartbeat.h) silences count anew.
  void Beat(TimePoint now, bool fresh_start) HORA_REQUIRES(mu_);
  // For the waiter on `request`: reads and writes its peer's socket unless
  // another thread holds the lock (then sets *busy), and makes the peer
  // quiet while the request is pending; whether any byte moved.
  bool ProgressPeer(const Request& request, bool* busy) HORA_EXCLUDES(mu_);
  bool Pump(size_t i) HORA_REQUIRES(mu_);  // false when the connection died
  bool ReadSome(size_t i) HORA_REQUIRES(mu_);
  bool WriteSome(size_t i) HORA_REQUIRES(mu_);

  const int rank_;
  const int size_;
  const Duration spin_;          // TcpMeshOptions::wait_spin, kOversubscribedSpin (see Wait)
  const Duration peer_timeout_;  // TcpMeshOptions::peer_timeout (see Beat)
  const bool yield_;             // TcpMeshOptions::yield (see Wait)
  Mutex mu_;
  std::vector<Peer> peers_ HORA_GUARDED_BY(mu_);  // (fds fixed after Start)
  bool stop_ HORA_GUARDED_BY(mu_) = false;
  bool closing_ HORA_GUARDED_BY(mu_) = false;   // the destructor runs: no peer is lost by silence
  bool watching_ HORA_GUARDED_BY(mu_) = false;  // every peer's I/O thread runs (WatchPeers)
  uint64_t moved_ HORA_GUARDED_BY(mu_) = 0;     // bytes read or written so far
  int quiet_peers_ HORA_GUARDED_BY(mu_) = 0;    // peers with Peer::quiet
  // The I/O thread looks at quiet peers every kQuietTickMs (Loop): a peer
  // turning quiet need not wake it.
  bool ticking_ HORA_GUARDED_BY(mu_) = false;
  uint64_t quiet_turns_ HORA_GUARDED_BY(mu_) = 0;  // times a peer turned quiet
  BufferPool pool_ HORA_GUARDED_BY(mu_);           // payloads of unexpected messages
  Status lost_ HORA_GUARDED_BY(mu_);               // set once a rank is lost
  int silent_peer_ HORA_GUARDED_BY(mu_) = -1;      // the peer lost_ found silent (Beat)
  net::Fd epoll_;
  net::Fd wake_;
  std::thread thread_;
};

}  // namespace hora::tcp_internal
