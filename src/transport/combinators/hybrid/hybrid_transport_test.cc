// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// HybridTransport's view of a loss: which side lost the group, and the
// silent peer named by the job's rank (the shared-memory side numbers its
// peers within the host); a wait on a TCP request keeps shared memory
// moving; which sends are read in place; and which groups get windows
// (those within this host, from its side, under their ranks there).
#include "transport/combinators/hybrid/hybrid_transport.h"

#include <gtest/gtest.h>

namespace hora {
namespace {

// A side that moves nothing and reports the loss it is given.
class LossOnly final : public Transport {
 public:
  LossOnly(int rank, int size, Status lost, int silent)
      : rank_(rank), size_(size), lost_(std::move(lost)), silent_(silent) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "loss-only"; }
  Request Isend(int, Tag, const void*, size_t) override { return nullptr; }
  Request Irecv(int, Tag, void*, size_t) override { return nullptr; }
  Request IrecvReduce(int, Tag, void*, size_t, const ReduceSpec&) override { return nullptr; }
  void Cancel(const Request&) override {}
  Status LostPeer() override { return lost_; }
  int SilentPeer() override { return silent_; }

 private:
  const int rank_, size_;
  const Status lost_;
  const int silent_;
};

// Rank 3 of 6, with ranks 2, 3 and 5 on its host (shared-memory ranks 0-2).
std::unique_ptr<Transport> Hybrid(Status shm_lost, int shm_silent, Status tcp_lost,
                                  int tcp_silent) {
  return CreateHybridTransport(3, 6, {2, 3, 5},
                               std::make_unique<LossOnly>(1, 3, shm_lost, shm_silent),
                               std::make_unique<LossOnly>(3, 6, tcp_lost, tcp_silent));
}

// A shared-memory side whose progress, once called `after` times,
// completes a request of the other side (a peer across hosts answers only
// once this host's shared memory moved).
class ProgressCounter final : public Transport {
 public:
  ProgressCounter(int after, Request completes) : after_(after), completes_(std::move(completes)) {}
  int rank() const override { return 1; }
  int size() const override { return 3; }
  const char* name() const override { return "progress-counter"; }
  Request Isend(int, Tag, const void*, size_t) override { return nullptr; }
  Request Irecv(int, Tag, void*, size_t) override { return nullptr; }
  Request IrecvReduce(int, Tag, void*, size_t, const ReduceSpec&) override { return nullptr; }
  void Cancel(const Request&) override {}
  bool Progress() override {
    if (++calls_ == after_ && completes_) completes_->Complete(Status::Ok());
    return false;
  }
  int calls() const { return calls_; }

 private:
  const int after_;
  const Request completes_;
  int calls_ = 0;
};

// A TCP side whose requests only a test completes.
class Pending final : public Transport {
 public:
  int rank() const override { return 3; }
  int size() const override { return 6; }
  const char* name() const override { return "pending"; }
  Request Isend(int peer, Tag, const void*, size_t bytes) override {
    return std::make_shared<RequestState>(true, peer, bytes);
  }
  Request Irecv(int peer, Tag, void*, size_t bytes) override {
    return std::make_shared<RequestState>(false, peer, bytes);
  }
  Request IrecvReduce(int, Tag, void*, size_t, const ReduceSpec&) override { return nullptr; }
  void Cancel(const Request&) override {}
};

TEST(HybridTransport, AWaitOnAnotherHostKeepsSharedMemoryMoving) {
  auto pending = std::make_unique<Pending>();
  char byte = 0;
  Request r = pending->Irecv(0, 7, &byte, 1);
  auto counter = std::make_unique<ProgressCounter>(50, r);
  ProgressCounter* shm = counter.get();
  auto t = CreateHybridTransport(3, 6, {2, 3, 5}, std::move(counter), std::move(pending));
  EXPECT_TRUE(t->Wait(r, Clock::now() + std::chrono::seconds(20)).ok());
  EXPECT_GE(shm->calls(), 50);
  // Nothing completes it: the wait ends at its deadline, naming the request.
  Request never = std::make_shared<RequestState>(false, 4, 8);
  never->SetRoute(1, 4);
  const Status st = t->Wait(never, Clock::now() + std::chrono::milliseconds(20));
  EXPECT_EQ(st.code(), StatusCode::kTimeout) << st.ToString();
  EXPECT_NE(st.message().find("receiving 8 B from rank 4"), std::string::npos) << st.message();
}

TEST(HybridTransport, NamesASilentPeerOnThisHostByItsRankInTheJob) {
  auto t = Hybrid(UnavailableError("rank 2 silent"), 2, Status::Ok(), -1);
  EXPECT_EQ(t->SilentPeer(), 5);
  EXPECT_EQ(t->LostPeer().message(), "rank 2 silent");
}

TEST(HybridTransport, NamesASilentPeerOnAnotherHost) {
  auto t = Hybrid(Status::Ok(), -1, UnavailableError("rank 0 silent"), 0);
  EXPECT_EQ(t->SilentPeer(), 0);
}

TEST(HybridTransport, NoSilentPeerWhenTheLossWasAnother) {
  EXPECT_EQ(Hybrid(Status::Ok(), -1, Status::Ok(), -1)->SilentPeer(), -1);
  // This host's side lost the group first (a process ended): the other
  // side's later silence is not why.
  EXPECT_EQ(
      Hybrid(UnavailableError("rank 2 ended"), -1, UnavailableError("silent"), 1)->SilentPeer(),
      -1);
}

// A side whose rank 2 reads rank 1's sends in place from 1 KiB, or (`all`)
// every rank every other's.
class InPlaceSide final : public Transport {
 public:
  InPlaceSide(int rank, int size, bool all) : rank_(rank), size_(size), all_(all) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "reads-in-place"; }
  Request Isend(int, Tag, const void*, size_t) override { return nullptr; }
  Request Irecv(int, Tag, void*, size_t) override { return nullptr; }
  Request IrecvReduce(int, Tag, void*, size_t, const ReduceSpec&) override { return nullptr; }
  void Cancel(const Request&) override {}
  bool ReadsInPlace(int from, int to, size_t bytes) override {
    return all_ || (from == 1 && to == 2 && bytes >= 1024);
  }

 private:
  const int rank_, size_;
  const bool all_;
};

// Only between ranks of this host, through this host's side, under their
// ranks there; never across hosts or between ranks of another (the TCP
// side, which would say yes, is not asked).
TEST(HybridTransport, ReadsInPlaceOnlyWhereThisHostsSideSaysSo) {
  auto t = CreateHybridTransport(3, 6, {2, 3, 5}, std::make_unique<InPlaceSide>(1, 3, false),
                                 std::make_unique<InPlaceSide>(3, 6, true));
  EXPECT_TRUE(t->ReadsInPlace(3, 5, 1024));  // shared-memory ranks 1 to 2
  EXPECT_FALSE(t->ReadsInPlace(3, 5, 1023));
  EXPECT_FALSE(t->ReadsInPlace(5, 3, 1 << 20));
  EXPECT_FALSE(t->ReadsInPlace(2, 3, 1 << 20));  // shared-memory ranks 0 to 1
  EXPECT_FALSE(t->ReadsInPlace(3, 4, 1 << 20));  // to another host
  EXPECT_FALSE(t->ReadsInPlace(0, 1, 1 << 20));  // within another host
  EXPECT_FALSE(t->ReadsInPlace(3, 6, 1 << 20));  // no such rank
}

// A side that records the groups it is asked windows for (and has none).
class GroupsSide final : public Transport {
 public:
  int rank() const override { return 1; }
  int size() const override { return 3; }
  const char* name() const override { return "groups"; }
  Request Isend(int, Tag, const void*, size_t) override { return nullptr; }
  Request Irecv(int, Tag, void*, size_t) override { return nullptr; }
  Request IrecvReduce(int, Tag, void*, size_t, const ReduceSpec&) override { return nullptr; }
  void Cancel(const Request&) override {}
  Result<std::unique_ptr<PendingGroupWindows>> PrepareGroupWindows(std::span<const int> ranks,
                                                                   uint64_t key) override {
    asked->emplace_back(ranks.begin(), ranks.end());
    asked->back().push_back(static_cast<int>(key));
    return std::unique_ptr<PendingGroupWindows>();
  }
  std::vector<std::vector<int>>* asked = nullptr;
};

TEST(HybridTransport, AGroupWithinThisHostGetsItsSidesWindowsAndOtherGroupsNone) {
  std::vector<std::vector<int>> asked;
  auto shm = std::make_unique<GroupsSide>();
  shm->asked = &asked;
  auto t = CreateHybridTransport(3, 6, {2, 3, 5}, std::move(shm),
                                 std::make_unique<LossOnly>(3, 6, Status::Ok(), -1));
  const std::vector<int> host = {2, 3, 5}, pair = {3, 5}, across = {1, 3}, bad = {3, 6};
  for (const auto* g : {&host, &pair, &across, &bad}) {
    auto p = t->PrepareGroupWindows(*g, 7);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(*p, nullptr);
  }
  // Job ranks 2, 3, 5 are this host's 0, 1, 2 (the key last); groups
  // spanning hosts, or naming no rank of the job, are not asked about.
  EXPECT_EQ(asked, (std::vector<std::vector<int>>{{0, 1, 2, 7}, {1, 2, 7}}));
}

}  // namespace
}  // namespace hora
