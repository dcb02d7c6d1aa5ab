// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/combinators/hybrid/hybrid_transport.h"

#include <algorithm>

namespace hora {
namespace {

class HybridTransport final : public Transport {
 public:
  HybridTransport(int rank, int size, std::vector<int> local_ranks, std::unique_ptr<Transport> shm,
                  std::unique_ptr<Transport> tcp)
      : rank_(rank),
        size_(size),
        to_local_(static_cast<size_t>(size), -1),
        local_ranks_(local_ranks),
        shm_(std::move(shm)),
        tcp_(std::move(tcp)) {
    for (size_t i = 0; i < local_ranks.size(); ++i) {
      to_local_[static_cast<size_t>(local_ranks[i])] = static_cast<int>(i);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "shm+tcp"; }

  Request Isend(int peer, Tag tag, const void* data, size_t bytes) override {
    if (int l = Local(peer); l >= 0) return Relabel(shm_->Isend(l, tag, data, bytes), peer);
    return tcp_->Isend(peer, tag, data, bytes);
  }
  Request IsendInPlace(int peer, Tag tag, const void* data, size_t bytes) override {
    if (int l = Local(peer); l >= 0) return Relabel(shm_->IsendInPlace(l, tag, data, bytes), peer);
    return tcp_->Isend(peer, tag, data, bytes);
  }
  Request Irecv(int peer, Tag tag, void* data, size_t bytes) override {
    if (int l = Local(peer); l >= 0) return Relabel(shm_->Irecv(l, tag, data, bytes), peer);
    return tcp_->Irecv(peer, tag, data, bytes);
  }
  Request IrecvReduce(int peer, Tag tag, void* dst, size_t count, const ReduceSpec& spec) override {
    if (int l = Local(peer); l >= 0)
      return Relabel(shm_->IrecvReduce(l, tag, dst, count, spec), peer);
    return tcp_->IrecvReduce(peer, tag, dst, count, spec);
  }
  void Cancel(const Request& request) override { Owner(request).Cancel(request); }

  Status Wait(const Request& request, TimePoint deadline) override {
    if (&Owner(request) == shm_.get()) return shm_->Wait(request, deadline);
    // A TCP request: TCP's own wait (which moves a small request's socket
    // from this thread), keeping shared memory moving meanwhile.
    return tcp_->WaitAlso(request, deadline, shm_progress_);
  }

  Status WaitFor(const Request& request, Duration timeout) override {
    if (&Owner(request) == shm_.get()) return shm_->WaitFor(request, timeout);
    return Transport::WaitFor(request, timeout);
  }
  bool Progress() override { return shm_->Progress(); }
  Transport* ThisHost(std::vector<int>* ranks) override {
    *ranks = local_ranks_;
    return shm_.get();
  }
  // A group within this host: its windows on shared memory, whose ranks
  // are this host's; a group spanning hosts has none (every member finds a
  // member off its host).
  Result<std::unique_ptr<PendingGroupWindows>> PrepareGroupWindows(std::span<const int> ranks,
                                                                   uint64_t key) override {
    std::vector<int> local;
    for (const int r : ranks) {
      const int l = r >= 0 && r < size_ ? to_local_[static_cast<size_t>(r)] : -1;
      if (l < 0) return std::unique_ptr<PendingGroupWindows>();
      local.push_back(l);
    }
    return shm_->PrepareGroupWindows(local, key);
  }
  bool ReadsInPlace(int from, int to, size_t bytes) override {
    // (Between hosts never; within another host this rank cannot say, and
    // a question about every pair of the job meets a pair across hosts.)
    if (from < 0 || from >= size_ || to < 0 || to >= size_) return false;
    const int f = to_local_[static_cast<size_t>(from)], t = to_local_[static_cast<size_t>(to)];
    return f >= 0 && t >= 0 && shm_->ReadsInPlace(f, t, bytes);
  }
  bool ReadsOnRequest(int from, int to) override {
    if (from < 0 || from >= size_ || to < 0 || to >= size_) return false;
    const int f = to_local_[static_cast<size_t>(from)], t = to_local_[static_cast<size_t>(to)];
    return f >= 0 && t >= 0 && shm_->ReadsOnRequest(f, t);
  }
  Status LostPeer() override {
    Status st = shm_->LostPeer();
    return st.ok() ? tcp_->LostPeer() : st;
  }
  int SilentPeer() override {
    if (shm_->LostPeer().ok()) return tcp_->SilentPeer();
    const int l = shm_->SilentPeer();
    return l < 0 ? -1 : local_ranks_[static_cast<size_t>(l)];
  }

 private:
  int Local(int peer) const {
    if (peer < 0 || peer >= size_ || peer == rank_) return -1;  // the TCP side reports the error
    return to_local_[static_cast<size_t>(peer)];
  }

  enum Route { kShm = 0, kTcp = 1 };

  // Shared-memory requests number peers locally; their messages should name
  // the job-wide rank.
  static Request Relabel(Request inner, int peer) {
    inner->SetRoute(kShm, peer);
    return inner;
  }
  Transport& Owner(const Request& request) { return request->route() == kShm ? *shm_ : *tcp_; }
  const int rank_;
  const int size_;
  std::vector<int> to_local_;           // global rank -> shm rank, or -1
  const std::vector<int> local_ranks_;  // shm rank -> global rank
  std::unique_ptr<Transport> shm_;
  std::unique_ptr<Transport> tcp_;
  const std::function<bool()> shm_progress_ = [this] { return shm_->Progress(); };
};

}  // namespace

std::unique_ptr<Transport> CreateHybridTransport(int rank, int size, std::vector<int> local_ranks,
                                                 std::unique_ptr<Transport> shm,
                                                 std::unique_ptr<Transport> tcp) {
  return std::make_unique<HybridTransport>(rank, size, std::move(local_ranks), std::move(shm),
                                           std::move(tcp));
}

}  // namespace hora
