// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The shm transport: posting, cancelling, waiting (progress, spin, then
// sleep) and the sending side. Receiving: shm_receive.cc. Contracts are in
// shm_transport.h.
#include <algorithm>
#include <cstring>
#include <thread>

#include "transport/shm/shm_group_windows.h"
#include "transport/shm/shm_transport.h"
#include "transport/shm/shm_transport_impl.h"
#include "transport/tag_layout.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

namespace hora {
namespace {

using Sink = ShmTransport::Link::Sink;

}  // namespace

ShmTransport::ShmTransport(int rank, int size, Duration spin, bool yield,
                           std::vector<int> job_ranks)
    : rank_(rank),
      size_(size),
      spin_(spin),
      yield_(yield),
      job_ranks_(std::move(job_ranks)),
      direct_probe_(static_cast<uint64_t>(Clock::now().time_since_epoch().count()) ^
                    (static_cast<uint64_t>(getpid()) << 40) ^ reinterpret_cast<uintptr_t>(this)),
      links_(static_cast<size_t>(size)) {
  for (int p = 0; p < size; ++p) {
    if (p != rank) links_[static_cast<size_t>(p)] = std::make_unique<Link>();
  }
}

ShmTransport::~ShmTransport() {
  StopHeartbeat();
  // Peers waiting in a window step fail at once (they are rung below).
  if (own_window_segment_.mapped()) ShmWindowSegment::MarkClosed(own_window_segment_.data());
  for (auto& l : links_) {
    if (!l) continue;
    // Peers waiting for more from this rank fail at once instead of timing out.
    if (l->out_segment.mapped()) {
      l->out.MarkBroken(LeavesChannelWhole(*l) ? kShmBrokenClosed : kShmBrokenCancelled);
    }
    if (l->bell_segment.mapped()) l->bell.Ring();
    const std::string closed = "rank " + std::to_string(rank_) + ": shm transport closed while ";
    for (auto& s : l->sends) s.request->Complete(AbortedError(closed + s.request->Describe()));
    for (auto& r : l->posted) r.request->Complete(AbortedError(closed + r.request->Describe()));
    if (l->current.sink == Sink::kRecv) {
      l->current.recv.request->Complete(AbortedError(closed + l->current.recv.request->Describe()));
    }
  }
}

Request ShmTransport::Send(int peer, Tag tag, const void* data, size_t bytes, bool in_place) {
  auto req = std::make_shared<RequestState>(/*is_send=*/true, peer, bytes);
  MutexLock lock(mu_);
  if (!ValidPeer(peer, req)) return req;
  Link& l = link(peer);
  if (!l.out_broken.empty()) {
    req->Complete(UnavailableError(l.out_broken));
    return req;
  }
  Link::Send send{req, tag, static_cast<const std::byte*>(data), bytes};
  send.in_place = in_place;
  l.sends.push_back(std::move(send));
  if (l.sends.size() == 1) ProgressSends(peer, l);  // eager: usually done right here
  return req;
}

Request ShmTransport::Irecv(int peer, Tag tag, void* data, size_t bytes) {
  return Post(peer, tag, data, bytes, std::nullopt);
}

Request ShmTransport::IrecvReduce(int peer, Tag tag, void* dst, size_t count,
                                  const ReduceSpec& spec) {
  return Post(peer, tag, dst, count * DataTypeSize(spec.dtype), spec);
}

Request ShmTransport::Post(int peer, Tag tag, void* data, size_t bytes,
                           std::optional<ReduceSpec> reduce) {
  auto req = std::make_shared<RequestState>(/*is_send=*/false, peer, bytes);
  MutexLock lock(mu_);
  if (!ValidPeer(peer, req)) return req;
  Link& l = link(peer);
  Link::Recv recv{req, tag, static_cast<std::byte*>(data), bytes, reduce};
  // The oldest message with this tag may already have been set aside.
  auto it = FindTag(l.unexpected, tag);
  if (it != l.unexpected.end()) {
    if (it->bytes != bytes) {
      req->Complete(InvalidArgument(MismatchMessage(peer, tag, it->bytes, bytes)));
    } else {
      Deliver(recv, 0, it->data.data.get(), bytes);
      req->Complete(Status::Ok());
    }
    pool_.Give(std::move(it->data));
    l.unexpected.erase(it);
    return req;
  }
  if (!l.in_broken.empty()) {
    req->Complete(UnavailableError(l.in_broken));
    return req;
  }
  l.posted.push_back(std::move(recv));
  ProgressRecvs(peer, l);
  return req;
}

void ShmTransport::Cancel(const Request& request) {
  MutexLock lock(mu_);
  if (request->done()) return;
  const int peer = request->peer();
  if (peer < 0 || peer >= size_ || peer == rank_) return;  // such requests fail at once
  Link& l = link(peer);
  const Status cancelled = AbortedError("cancelled " + request->Describe());
  if (request->is_send()) {
    auto it = std::find_if(l.sends.begin(), l.sends.end(),
                           [&](const Link::Send& s) { return s.request == request; });
    if (it == l.sends.end()) return;
    if (!it->started) {
      l.sends.erase(it);
      request->Complete(cancelled);
      return;
    }
    if (it->direct_until != 0 && CancelDirect(l)) return;
    // Only the front send can be partly written; its rest will never come.
    l.out_broken = "rank " + std::to_string(rank_) + " cancelled a message to rank " +
                   std::to_string(peer) + " (" + tag_layout::Describe(it->tag) +
                   ") after writing " + std::to_string(it->written) + " of " +
                   std::to_string(it->bytes) + " bytes" +
                   (it->direct_until != 0 ? " (read directly by the peer)" : "") +
                   "; its shared-memory channel to rank " + std::to_string(peer) + " is unusable";
    l.out.MarkBroken(kShmBrokenCancelled);
    l.bell.Ring();
    request->Complete(cancelled);
    for (auto& s : l.sends) s.request->Complete(UnavailableError(l.out_broken));
    l.sends.clear();
    return;
  }
  if (l.current.sink == Sink::kRecv && l.current.recv.request == request) {
    l.current.sink = Sink::kDiscard;  // skip the rest of this message
    l.current.recv = {};
  } else {
    auto it = std::find_if(l.posted.begin(), l.posted.end(),
                           [&](const Link::Recv& r) { return r.request == request; });
    if (it != l.posted.end()) l.posted.erase(it);
  }
  request->Complete(cancelled);
}

bool ShmTransport::LeavesChannelWhole(Link& l) {
  if (l.sends.empty() || !l.sends.front().started) return true;
  const uint64_t direct = l.sends.front().direct_until;
  return direct != 0 && (l.out.Released(direct) || l.out.Withdraw(direct));
}

bool ShmTransport::CancelDirect(Link& l) {
  Link::Send& s = l.sends.front();  // (only the front send is ever started)
  Request request = s.request;
  if (l.out.Withdraw(s.direct_until)) {  // the receiver will skip it
    l.sends.pop_front();
    request->Complete(AbortedError("cancelled " + request->Describe()));
    return true;
  }
  // The receiver claimed it: it reads it now (under its own lock, in one
  // go) or has read it; either ends within the read's time.
  const TimePoint give_up = Clock::now() + kShmClaimedReadWait;
  while (!l.out.Released(s.direct_until)) {
    // (A read that failed, or a reader stopped mid-read.)
    if (l.out.DirectFailed(s.direct_until) || Clock::now() >= give_up) return false;
    std::this_thread::yield();
  }
  // Declined (to come through the slots) it was never delivered: as if
  // withdrawn. Otherwise it was delivered before the cancel could stop it.
  const bool declined = l.out.DirectDeclined(s.direct_until);
  l.sends.pop_front();
  request->Complete(declined ? AbortedError("cancelled " + request->Describe()) : Status::Ok());
  return true;
}

Status ShmTransport::Wait(const Request& request, TimePoint deadline) {
  return WaitUntil(request, deadline, Duration::zero());
}

Status ShmTransport::WaitFor(const Request& request, Duration timeout) {
  return WaitUntil(request, std::nullopt, timeout);
}

Status ShmTransport::WaitUntil(const Request& request, std::optional<TimePoint> deadline,
                               Duration timeout) {
  // A clock read costs about as much as a small exchange (tens of ns), so
  // the spin looks at the clock only every kClockEvery rounds: the spin
  // window and the deadline are checked there. Without a deadline it is
  // `timeout` from that first look, a few rounds after the wait began.
  constexpr uint32_t kClockEvery = 64;
  bool moved_since_check = true;  // (re)starts the spin window at the next check
  TimePoint spin_until{};
  for (uint32_t round = 1;; ++round) {
    moved_since_check |= ProgressAll();
    if (request->done()) return request->status();
    if (round % kClockEvery != 0) {
      if (yield_) {
        std::this_thread::yield();  // (as below: where ranks outnumber cores, at every look)
      } else {
        CpuRelax();
      }
      continue;
    }
    const TimePoint now = Clock::now();
    if (!deadline) deadline = now + timeout;
    if (now >= *deadline) return TimeoutError("timed out " + request->Describe());
    if (moved_since_check) {
      spin_until = now + spin_;
      moved_since_check = false;
    }
    if (now < spin_until) {
      if (yield_) {
        std::this_thread::yield();  // the peer waited for may be queued on this core
      } else {
        CpuRelax();
      }
      continue;
    }
    // Nothing moved for a while: sleep until a peer rings (shm_doorbell.h).
    const uint32_t seen = own_bell_.PrepareSleep();
    if (!ProgressAll(/*wait_for_lock=*/true) && !request->done()) {
      own_bell_.Sleep(seen, std::min<Duration>(*deadline - Clock::now(), kShmMaxSleep));
    }
    own_bell_.FinishSleep();
    // A lost peer never rings: look for one (a kill() per peer, a system call
    // each) at most every kShmLivenessEvery, not after every wake-up.
    if ((!LivenessDue() || CheckPeersAlive()) && request->done()) return request->status();
    moved_since_check = true;
  }
}

void ShmTransport::OpenWindows() {
  std::vector<void*> segments(static_cast<size_t>(size_));
  for (int k = 0; k < size_; ++k) {
    segments[static_cast<size_t>(k)] =
        k == rank_ ? own_window_segment_.data() : link(k).window_segment.data();
  }
  for (uint32_t c = 0; c < kSharedWindowContexts; ++c) {
    windows_.push_back(std::make_unique<ShmWindow>(*this, c, segments));
  }
}

void ShmTransport::RingPeers(std::span<const int> ranks) {
  if (ranks.empty()) {
    for (auto& l : links_) {
      if (l) l->bell.Ring();
    }
    return;
  }
  for (const int k : ranks) {
    if (k != rank_) link(k).bell.Ring();
  }
}

Result<std::unique_ptr<PendingGroupWindows>> ShmTransport::PrepareGroupWindows(
    std::span<const int> ranks, uint64_t key) {
  return PrepareShmGroupWindows(*this, ranks, key);
}

bool ShmTransport::ValidPeer(int peer, const Request& request) {
  if (!lost_.ok()) {
    request->Complete(lost_);
    return false;
  }
  if (peer >= 0 && peer < size_ && peer != rank_) return true;
  request->Complete(InvalidPeerError(rank_, peer, size_));
  return false;
}

bool ShmTransport::ProgressAll(bool wait_for_lock) {
  // A thread that finds another progressing leaves it the work: whatever
  // completes, completes for both.
  if (wait_for_lock) {
    MutexLock lock(mu_);
    return ProgressAllLocked();
  }
  if (!mu_.try_lock()) return false;
  MutexLock lock(mu_, std::adopt_lock);
  return ProgressAllLocked();
}

bool ShmTransport::ProgressAllLocked() {
  if (!lost_.ok()) return false;  // every request has failed; touch no buffer again
  bool moved = false;
  for (int p = 0; p < size_; ++p) {
    Link* l = links_[static_cast<size_t>(p)].get();
    if (l == nullptr) continue;
    if (!l->sends.empty()) moved |= ProgressSends(p, *l);
    if (l->current.sink != Sink::kNone || !l->posted.empty()) moved |= ProgressRecvs(p, *l);
  }
  return moved;
}

bool ShmTransport::ProgressSends(int peer, Link& l) {
  bool moved = false;
  while (!l.sends.empty()) {
    Link::Send& s = l.sends.front();
    const bool direct = (l.direct_min_bytes != 0 && s.bytes >= l.direct_min_bytes) ||
                        (s.in_place && l.direct_on_request && s.bytes > 0);
    if (!s.started && !s.declined && direct) {
      // Single copy: the peer reads the bytes from here; the send is done
      // when it released the slot that said where.
      if (!l.out.CanWrite()) return moved;
      l.out.PublishDirect(s.tag, s.bytes, reinterpret_cast<uintptr_t>(s.data));
      s.started = true;
      s.direct_until = l.out.published();
      moved = true;
      l.bell.Ring();
    }
    if (s.direct_until != 0) {
      if (!l.out.Released(s.direct_until)) {
        // A peer that closed its session unread will never read it; one
        // whose read failed gave up the channel.
        std::string why;
        if (l.out.DirectFailed(s.direct_until)) {
          why = Name(peer) + " could not read this rank's message (" + s.request->Describe() +
                ") from its memory, and gave up the channel (its error says why)";
        } else if (l.in.broken() == kShmBrokenClosed && l.out.Withdraw(s.direct_until)) {
          why = Name(peer) + " closed its session before reading this rank's message (" +
                s.request->Describe() + ")";
        } else {
          return moved;
        }
        Request failed = std::move(s.request);
        l.sends.pop_front();
        failed->Complete(UnavailableError(why));
        moved = true;
        continue;
      }
      moved = true;
      if (l.out.DirectDeclined(s.direct_until)) {  // wanted through the slots: from the start
        s.started = false;
        s.declined = true;
        s.direct_until = 0;
        continue;
      }
      s.written = s.bytes;
    }
    while (!s.started || s.written < s.bytes) {
      if (!l.out.CanWrite()) return moved;
      const size_t n = std::min(kShmSlotBytes, s.bytes - s.written);
      if (n > 0) std::memcpy(l.out.WritePayload(static_cast<uint32_t>(n)), s.data + s.written, n);
      l.out.Publish(s.tag, s.bytes, static_cast<uint32_t>(n), s.started ? 0 : kShmFirstSlot);
      s.started = true;
      s.written += n;
      moved = true;
      l.bell.Ring();
    }
    Request done = std::move(s.request);
    l.sends.pop_front();
    done->Complete(Status::Ok());
  }
  return moved;
}

}  // namespace hora
