// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/loopback/loopback_transport.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "common/units.h"
#include "transport/loopback/loopback_group_windows.h"
#include "transport/tag_layout.h"

namespace hora {
namespace {

// Copies (or reduces) a matched message and completes both sides. Runs
// without any lock.
void Deliver(const LoopbackHub::Pending& send, const LoopbackHub::Pending& recv, int dst) {
  if (send.bytes != recv.bytes) {
    Status st =
        InvalidArgument("message size mismatch: rank " + std::to_string(send.src) + " sent " +
                        ExactBytes(send.bytes) + " but rank " + std::to_string(dst) + " expected " +
                        ExactBytes(recv.bytes) + " (" + tag_layout::Describe(send.tag) + ")");
    send.request->Complete(st);
    recv.request->Complete(st);
    return;
  }
  if (send.bytes > 0) {
    if (recv.reduce) {
      const ReduceSpec& r = *recv.reduce;
      r.reduce(r.dtype, r.op, recv.recv_buf, send.send_buf, send.bytes / DataTypeSize(r.dtype));
    } else {
      std::memcpy(recv.recv_buf, send.send_buf, send.bytes);
    }
  }
  recv.request->Complete(Status::Ok());
  send.request->Complete(Status::Ok());
}

class LoopbackTransport final : public Transport {
 public:
  LoopbackTransport(std::shared_ptr<LoopbackHub> hub, int rank, int generation,
                    Duration absent_after)
      : hub_(std::move(hub)),
        rank_(rank),
        generation_(generation),
        absent_after_(absent_after),
        absent_at_(absent_after > Duration::zero() ? DeadlineAfter(Clock::now(), absent_after)
                                                   : TimePoint::max()),
        all_came_(absent_after <= Duration::zero()) {}
  ~LoopbackTransport() override { hub_->Close(rank_); }

  int rank() const override { return rank_; }
  int size() const override { return hub_->size(); }
  const char* name() const override { return "loopback"; }
  Status LostPeer() override {
    Status lost = hub_->lost();
    if (!lost.ok() || all_came_.load(std::memory_order_acquire)) return lost;
    const int absent = hub_->FirstAbsent(generation_);
    if (absent < 0) {
      all_came_.store(true, std::memory_order_release);
      return lost;
    }
    if (Clock::now() < absent_at_) return lost;
    return UnavailableError("rank " + std::to_string(absent) +
                            " of this ThreadWorld made no Session within " +
                            FormatSeconds(absent_after_) + " s (HORA_START_TIMEOUT_S) of rank " +
                            std::to_string(rank_) + "'s");
  }

  Request Isend(int peer, Tag tag, const void* data, size_t bytes) override {
    auto req = std::make_shared<RequestState>(/*is_send=*/true, peer, bytes);
    if (!ValidPeer(peer, req)) return req;
    LoopbackHub::Mailbox& box = hub_->mailbox(peer);
    LoopbackHub::Pending send{rank_, tag, nullptr, data, bytes, req, std::nullopt};
    LoopbackHub::Pending recv{};
    bool lost = true;
    {
      MutexLock lock(box.mu);
      // (Lose sets any_lost, then drains the mailboxes: asked again here.)
      if (!hub_->any_lost()) {
        lost = false;
        auto it = std::find_if(box.posted_recvs.begin(), box.posted_recvs.end(),
                               [&](const auto& r) { return r.src == rank_ && r.tag == tag; });
        if (it == box.posted_recvs.end()) {
          box.unexpected_sends.push_back(std::move(send));
          return req;
        }
        recv = std::move(*it);
        box.posted_recvs.erase(it);
      }
    }
    if (lost) {
      req->Complete(hub_->lost());
      return req;
    }
    Deliver(send, recv, peer);
    return req;
  }

  Request Irecv(int peer, Tag tag, void* data, size_t bytes) override {
    return Post(peer, tag, data, bytes, std::nullopt);
  }

  Request IrecvReduce(int peer, Tag tag, void* dst, size_t count, const ReduceSpec& spec) override {
    return Post(peer, tag, dst, count * DataTypeSize(spec.dtype), spec);
  }

  SharedWindow* Window(uint32_t context) override HORA_EXCLUDES(windows_mu_) {
    if (context >= kSharedWindowContexts) return nullptr;
    MutexLock lock(windows_mu_);
    auto& w = windows_[context];
    if (!w) {
      w = std::make_unique<LoopbackWindow>(
          rank_, size(), context, hub_->WindowGroup(context, generation_), *hub_, generation_);
    }
    return w.get();
  }

  Result<std::unique_ptr<PendingGroupWindows>> PrepareGroupWindows(std::span<const int> ranks,
                                                                   uint64_t key) override {
    return PrepareLoopbackGroupWindows(hub_, rank_, generation_, ranks, key);
  }

  void Cancel(const Request& request) override {
    if (request->done()) return;
    // A pending send waits in the peer's mailbox; a pending receive in ours.
    int owner = request->is_send() ? request->peer() : rank_;
    if (owner >= 0 && owner < size()) {
      LoopbackHub::Mailbox& box = hub_->mailbox(owner);
      MutexLock lock(box.mu);
      auto& list = request->is_send() ? box.unexpected_sends : box.posted_recvs;
      for (auto it = list.begin(); it != list.end(); ++it) {
        if (it->request == request) {
          list.erase(it);
          request->Complete(AbortedError("cancelled " + request->Describe()));
          return;
        }
      }
    }
    // Not in a list: it is being copied right now. The copy is short and
    // bounded; wait for it so the caller may free the buffer.
    while (!request->done()) std::this_thread::yield();
  }

 private:
  Request Post(int peer, Tag tag, void* data, size_t bytes, std::optional<ReduceSpec> reduce) {
    auto req = std::make_shared<RequestState>(/*is_send=*/false, peer, bytes);
    if (!ValidPeer(peer, req)) return req;
    LoopbackHub::Mailbox& box = hub_->mailbox(rank_);
    LoopbackHub::Pending recv{peer, tag, data, nullptr, bytes, req, reduce};
    LoopbackHub::Pending send{};
    bool lost = true;
    {
      MutexLock lock(box.mu);
      if (!hub_->any_lost()) {  // (as in Isend)
        lost = false;
        auto it = std::find_if(box.unexpected_sends.begin(), box.unexpected_sends.end(),
                               [&](const auto& s) { return s.src == peer && s.tag == tag; });
        if (it == box.unexpected_sends.end()) {
          box.posted_recvs.push_back(std::move(recv));
          return req;
        }
        send = std::move(*it);
        box.unexpected_sends.erase(it);
      }
    }
    if (lost) {
      req->Complete(hub_->lost());
      return req;
    }
    Deliver(send, recv, rank_);
    return req;
  }

  bool ValidPeer(int peer, const Request& req) {
    if (peer >= 0 && peer < size() && peer != rank_) return true;
    req->Complete(InvalidPeerError(rank_, peer, size()));
    return false;
  }

  std::shared_ptr<LoopbackHub> hub_;
  int rank_;
  int generation_;
  const Duration absent_after_;
  const TimePoint absent_at_;
  std::atomic<bool> all_came_;  // every rank connected to this generation (or no bound)
  Mutex windows_mu_;            // the engine's thread and the caller's may ask at once
  std::unique_ptr<LoopbackWindow> windows_[kSharedWindowContexts] HORA_GUARDED_BY(windows_mu_);
};

}  // namespace

LoopbackHub::LoopbackHub(int size)
    : closed_(new std::atomic<int>[static_cast<size_t>(size)]),
      connections_(new std::atomic<int>[static_cast<size_t>(size)]) {
  for (int i = 0; i < size; ++i) {
    mailboxes_.push_back(std::make_unique<Mailbox>());
    closed_[static_cast<size_t>(i)].store(0);
    connections_[static_cast<size_t>(i)].store(0);
  }
}

int LoopbackHub::FirstAbsent(int generation) const {
  for (int k = 0; k < size(); ++k) {
    if (connections_[static_cast<size_t>(k)].load(std::memory_order_acquire) < generation) {
      return k;
    }
  }
  return -1;
}

std::shared_ptr<LoopbackWindowGroup> LoopbackHub::WindowGroup(uint32_t context, int generation,
                                                              uint64_t group, int group_size) {
  MutexLock lock(windows_mu_);
  std::weak_ptr<LoopbackWindowGroup>& slot = windows_[{group, context, generation}];
  std::shared_ptr<LoopbackWindowGroup> g = slot.lock();
  if (!g) {
    g = std::make_shared<LoopbackWindowGroup>(group == kAllRanks ? size() : group_size,
                                              SharedWindowBytes(context));
    slot = g;
  }
  return g;
}

void LoopbackHub::Lose(int rank) {
  Status lost;
  {
    MutexLock lock(lost_mu_);
    if (!lost_.ok()) return;
    lost_ = UnavailableError("rank " + std::to_string(rank) + " was lost (a test's stand-in for " +
                             "its process ending)");
    lost = lost_;
    any_lost_.store(true, std::memory_order_release);
  }
  for (const std::unique_ptr<Mailbox>& box : mailboxes_) {
    std::deque<Pending> pending;
    {
      MutexLock lock(box->mu);
      pending.swap(box->posted_recvs);
      for (Pending& p : box->unexpected_sends) pending.push_back(std::move(p));
      box->unexpected_sends.clear();
    }
    for (Pending& p : pending) p.request->Complete(lost);
  }
}

Status LoopbackHub::lost() const {
  MutexLock lock(lost_mu_);
  return lost_;
}

void LoopbackHub::Close(int rank) {
  closed_[static_cast<size_t>(rank)].fetch_add(1, std::memory_order_acq_rel);
  MutexLock lock(windows_mu_);
  for (auto it = windows_.begin(); it != windows_.end();) {
    std::shared_ptr<LoopbackWindowGroup> g = it->second.lock();
    if (!g) {
      it = windows_.erase(it);
      continue;
    }
    { MutexLock wait_lock(g->mu); }
    g->cv.notify_all();
    ++it;
  }
}

std::shared_ptr<LoopbackHub> LoopbackHub::Create(int size) {
  return std::shared_ptr<LoopbackHub>(new LoopbackHub(size));
}

std::unique_ptr<Transport> LoopbackHub::ConnectIfFree(int rank, Duration absent_after) {
  int generation = 0;
  {
    MutexLock lock(windows_mu_);
    std::atomic<int>& connects = connections_[static_cast<size_t>(rank)];
    if (connects.load(std::memory_order_relaxed) >
        closed_[static_cast<size_t>(rank)].load(std::memory_order_acquire)) {
      return nullptr;
    }
    generation = connects.fetch_add(1, std::memory_order_acq_rel) + 1;
  }
  return std::make_unique<LoopbackTransport>(shared_from_this(), rank, generation, absent_after);
}

std::unique_ptr<Transport> LoopbackHub::Connect(int rank) {
  int generation = 0;
  {
    MutexLock lock(windows_mu_);
    generation =
        connections_[static_cast<size_t>(rank)].fetch_add(1, std::memory_order_acq_rel) + 1;
  }
  return std::make_unique<LoopbackTransport>(shared_from_this(), rank, generation,
                                             Duration::zero());
}

}  // namespace hora
