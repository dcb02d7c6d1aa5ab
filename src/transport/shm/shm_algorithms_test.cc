// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Hora's collective algorithms over the shm transport, ranks as threads,
// checked against expectations computed locally (float32 sums of small
// integers, so results are exact); and alltoall's two ways of posting.
#include <numeric>
#include <set>
#include <string>
#include <tuple>

#include "collectives/algorithms.h"
#include "collectives/pair_in_place.h"
#include "support/forwarding_transport.h"
#include "support/shm_test_util.h"
#include "transport/combinators/subset/subset_transport.h"

namespace hora {
namespace {

using shm_test::RunRanks;
using shm_test::UniqueJobId;

uint8_t Byte(size_t from, size_t to, size_t i) {
  return static_cast<uint8_t>(from * 37 + to * 11 + i * 7 + (i >> 8));
}

void CheckAllreduce(Comm& comm, size_t count, Status (*algo)(Comm&, const AllreduceArgs&),
                    const char* name) {
  const int n = comm.size();
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((comm.rank() + 1) * (i % 7));
  Status st = algo(comm, AllreduceArgs{data.data(), data.data(), count, DataType::kFloat32, {}});
  ASSERT_TRUE(st.ok()) << name << ": " << st.ToString();
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    if (data[i] != static_cast<float>(n * (n + 1) / 2 * (i % 7))) ++wrong;
  }
  EXPECT_EQ(wrong, 0u) << name << " rank " << comm.rank();
}

// Rank q's block count + q bytes, none for rank `empty`.
void CheckAllgather(Comm& comm, size_t count, size_t empty = SIZE_MAX) {
  const auto n = static_cast<size_t>(comm.size()), r = static_cast<size_t>(comm.rank());
  std::vector<size_t> sizes(n);
  for (size_t q = 0; q < n; ++q) sizes[q] = q == empty ? 0 : count + q;  // uneven
  std::vector<uint8_t> in(sizes[r]), out(std::accumulate(sizes.begin(), sizes.end(), size_t{0}));
  for (size_t i = 0; i < in.size(); ++i) in[i] = Byte(r, 0, i);
  Status st = AllgatherRing(comm, in.data(), out.data(), sizes);
  ASSERT_TRUE(st.ok()) << st.ToString();
  size_t wrong = 0, off = 0;
  for (size_t q = 0; q < n; off += sizes[q], ++q) {
    for (size_t i = 0; i < sizes[q]; ++i) wrong += out[off + i] != Byte(q, 0, i);
  }
  EXPECT_EQ(wrong, 0u) << "allgather rank " << r;
}

// In place: each rank's block (sizes[rank] bytes) already at its place in
// the output.
void CheckAllgatherInPlace(Comm& comm, const std::vector<size_t>& sizes) {
  const auto r = static_cast<size_t>(comm.rank());
  std::vector<uint8_t> out(std::accumulate(sizes.begin(), sizes.end(), size_t{0}), 0);
  const size_t mine = std::accumulate(sizes.begin(), sizes.begin() + comm.rank(), size_t{0});
  for (size_t i = 0; i < sizes[r]; ++i) out[mine + i] = Byte(r, 5, i);
  Status st = AllgatherRing(comm, out.data() + mine, out.data(), sizes);
  ASSERT_TRUE(st.ok()) << st.ToString();
  size_t wrong = 0;
  for (size_t q = 0, off = 0; q < sizes.size(); off += sizes[q], ++q) {
    for (size_t i = 0; i < sizes[q]; ++i) wrong += out[off + i] != Byte(q, 5, i);
  }
  EXPECT_EQ(wrong, 0u) << "in-place allgather rank " << r;
}

void CheckBroadcast(Comm& comm, size_t bytes,
                    Status (*algo)(Comm&, void*, size_t, int) = &BroadcastBinomial, int root = -1) {
  if (root < 0) root = comm.size() - 1;
  std::vector<uint8_t> data(bytes, 0);
  if (comm.rank() == root) {
    for (size_t i = 0; i < bytes; ++i) data[i] = Byte(9, 9, i);
  }
  Status st = algo(comm, data.data(), bytes, root);
  ASSERT_TRUE(st.ok()) << st.ToString();
  size_t wrong = 0;
  for (size_t i = 0; i < bytes; ++i) wrong += data[i] != Byte(9, 9, i);
  EXPECT_EQ(wrong, 0u) << "broadcast rank " << comm.rank();
}

void CheckAlltoall(Comm& comm, size_t count) {
  const auto n = static_cast<size_t>(comm.size()), r = static_cast<size_t>(comm.rank());
  auto split = [&](size_t from, size_t to) { return count == 0 ? 0 : count + from + 2 * to; };
  std::vector<size_t> send(n), recv(n);
  for (size_t p = 0; p < n; ++p) {
    send[p] = split(r, p);
    recv[p] = split(p, r);
  }
  std::vector<uint8_t> in(std::accumulate(send.begin(), send.end(), size_t{0}));
  std::vector<uint8_t> out(std::accumulate(recv.begin(), recv.end(), size_t{0}));
  for (size_t p = 0, off = 0; p < n; off += send[p], ++p) {
    for (size_t i = 0; i < send[p]; ++i) in[off + i] = Byte(r, p, i);
  }
  Status st = AlltoallPairwise(comm, in.data(), send, out.data(), recv);
  ASSERT_TRUE(st.ok()) << st.ToString();
  size_t wrong = 0;
  for (size_t p = 0, off = 0; p < n; off += recv[p], ++p) {
    for (size_t i = 0; i < recv[p]; ++i) wrong += out[off + i] != Byte(p, r, i);
  }
  EXPECT_EQ(wrong, 0u) << "alltoall rank " << r;
}

// Ranks, elements, and the single-copy threshold (0: every message through
// the slots).
class ShmAlgorithms : public ::testing::TestWithParam<std::tuple<int, size_t, size_t>> {};

TEST_P(ShmAlgorithms, MatchLocalExpectations) {
  const auto [n, count, single_copy] = GetParam();
  RunRanks(
      n, UniqueJobId("algos"),
      [&](Transport& t) {
        Comm comm(t, WaitPolicy{std::chrono::seconds(120)}, 256 << 10);
        CheckAllreduce(comm, count, &AllreduceRing, "ring");
        CheckAllreduce(comm, count, &AllreduceHalvingDoubling, "halving_doubling");
        CheckAllgather(comm, count * 4);
        CheckBroadcast(comm, count * 4);
        CheckAlltoall(comm, count);
        // The engine's data context has a shared window (shm_window.h).
        Comm shared(t, WaitPolicy{std::chrono::seconds(120)}, 256 << 10, 1);
        ASSERT_NE(shared.window(), nullptr);
        CheckAllreduce(shared, count, &AllreduceShared, "shared_memory");
        CheckAllreduce(shared, count / 3 + 1, &AllreduceShared, "shared_memory, odd size");
        EXPECT_TRUE(BarrierShared(shared).ok());
      },
      [&](int) { return shm_test::Options(single_copy); });
}

// count 1 << 20 is 4 MiB of float32: 16 slots per message, 4 window chunks.
INSTANTIATE_TEST_SUITE_P(Shm, ShmAlgorithms,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Values(size_t{0}, size_t{1}, size_t{1000},
                                                              size_t{1} << 20),
                                            ::testing::Values(size_t{0}, size_t{4096})));

// Rank 0's sends are read in place from 4 KiB, the others' from 8 KiB
// (each rank's own threshold), and every rank knows every pair's. An
// alltoall's rank posts its exchanges at once where its peers read all its
// blocks in place, in pairs otherwise: blocks of about 5 KB take both ways
// at once (rank 0 at once), and the results match. An allgather, and a
// scatter-allgather broadcast's, take every block at once only where every
// rank's is read in place by all (1 MiB blocks, one rank's empty; not 5
// KB ones). A process set's view asks its parent about its ranks.
TEST(ShmAlgorithms, EachRankKnowsEveryPairsSingleCopyAndAllChooseAlike) {
  SKIP_WHERE_THE_KERNEL_FORBIDS_READS();
  RunRanks(
      4, UniqueJobId("in-place-mixed"),
      [&](Transport& t) {
        for (int a = 0; a < 4; ++a) {
          for (int b = 0; b < 4; ++b) {
            EXPECT_EQ(t.ReadsInPlace(a, b, 4096), a != b && a == 0) << a << " to " << b;
            EXPECT_EQ(t.ReadsInPlace(a, b, 8192), a != b) << a << " to " << b;
            EXPECT_FALSE(t.ReadsInPlace(a, b, 4095)) << a << " to " << b;
          }
          EXPECT_FALSE(t.ReadsInPlace(a, 4, 8192)) << "no such rank";
          EXPECT_FALSE(t.ReadsInPlace(-1, a, 8192)) << "no such rank";
        }
        if (t.rank() != 1) {  // (a set's members only)
          SubsetTransport view(t, {0, 2, 3});
          EXPECT_TRUE(view.ReadsInPlace(0, 1, 4096));   // 0 to 2
          EXPECT_FALSE(view.ReadsInPlace(1, 2, 4096));  // 2 to 3
          EXPECT_TRUE(view.ReadsInPlace(2, 1, 8192));   // 3 to 2
          EXPECT_FALSE(view.ReadsInPlace(2, 3, 8192)) << "no such rank";
        }
        Comm comm(t, WaitPolicy{std::chrono::seconds(120)}, 256 << 10);
        for (size_t count : {size_t{5000}, size_t{1} << 20}) {
          CheckAlltoall(comm, count);
          CheckAllgather(comm, count);
          CheckAllgather(comm, count, /*empty=*/1);
          for (int root : {0, 2}) CheckBroadcast(comm, count * 4, &BroadcastScatterAllgather, root);
        }
      },
      [](int r) { return shm_test::Options(r == 0 ? 4096 : 8192); });
}

// What a rank of a collective posted: the peers it had requests with when
// it first waited (at once: every peer; a ring's step or an alltoall's
// pair: two), and the algorithm its errors named (Comm::Where) at its last
// post.
class Posts final : public testing::ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  void Start(const Comm& comm) {
    comm_ = &comm;
    peers_.clear();
    peers_at_first_wait_ = 0;
    waited_ = false;
    in_place_sends_ = 0;
  }
  size_t peers_at_first_wait() const { return peers_at_first_wait_; }
  const std::string& named() const { return named_; }
  size_t in_place_sends() const { return in_place_sends_; }

  Request Isend(int peer, Tag tag, const void* data, size_t bytes) override {
    Note(peer);
    return ForwardingTransport::Isend(peer, tag, data, bytes);
  }
  Request IsendInPlace(int peer, Tag tag, const void* data, size_t bytes) override {
    Note(peer);
    ++in_place_sends_;
    return ForwardingTransport::IsendInPlace(peer, tag, data, bytes);
  }
  Request Irecv(int peer, Tag tag, void* data, size_t bytes) override {
    Note(peer);
    return ForwardingTransport::Irecv(peer, tag, data, bytes);
  }
  Status WaitFor(const Request& request, Duration timeout) override {
    if (!waited_) peers_at_first_wait_ = peers_.size();
    waited_ = true;
    return ForwardingTransport::WaitFor(request, timeout);
  }

 private:
  void Note(int peer) {
    peers_.insert(peer);
    if (comm_ != nullptr) named_ = comm_->Where();
  }
  const Comm* comm_ = nullptr;
  std::set<int> peers_;
  size_t peers_at_first_wait_ = 0;
  bool waited_ = false;
  std::string named_;
  size_t in_place_sends_ = 0;
};

// HORA_BLOCKS_AT_ONCE (Comm::blocks_at_once) decides how allgather,
// alltoall and the scatter-allgather broadcast post their blocks, with
// shared memory's single copy off (`single_copy` 0: every block through
// the slots, read in place by no one) or on; the results match either way.
void CheckPathTaken(size_t single_copy, BlocksAtOnce mode, bool at_once) {
  RunRanks(
      4, UniqueJobId("at-once-setting"),
      [&](Transport& t) {
        Posts posts(t);
        Comm comm(posts, WaitPolicy{std::chrono::seconds(120)}, 256 << 10);
        comm.SetBlocksAtOnce(mode);
        const std::string rank = "rank " + std::to_string(t.rank()) + ": ";
        const size_t count = size_t{1} << 20;
        posts.Start(comm);
        CheckAllgather(comm, count);
        EXPECT_EQ(posts.named(), rank + (at_once ? "allgather (at_once)" : "allgather (ring)"));
        EXPECT_EQ(posts.peers_at_first_wait(), at_once ? 3u : 2u) << "allgather";
        posts.Start(comm);
        CheckAllgatherInPlace(comm, {count + 1, 0, count, 3 * count + 5});
        EXPECT_EQ(posts.named(), rank + (at_once ? "allgather (at_once)" : "allgather (ring)"));
        posts.Start(comm);
        CheckAlltoall(comm, count);
        EXPECT_EQ(posts.named(), rank + (at_once ? "alltoall (at_once)" : "alltoall (pairwise)"));
        EXPECT_EQ(posts.peers_at_first_wait(), at_once ? 3u : 2u) << "alltoall";
        posts.Start(comm);
        CheckBroadcast(comm, count * 4, &BroadcastScatterAllgather, 1);
        EXPECT_EQ(posts.named(), rank + (at_once ? "broadcast (scatter_allgather, at once)"
                                                 : "broadcast (scatter_allgather)"));
      },
      [&](int) { return shm_test::Options(single_copy); });
}

TEST(ShmAlgorithms, BlocksAtOnceWhereSetOrWhereReadInPlace) {
  CheckPathTaken(0, BlocksAtOnce::kAuto, false);
  CheckPathTaken(0, BlocksAtOnce::kOn, true);
  CheckPathTaken(0, BlocksAtOnce::kOff, false);
}

TEST(ShmAlgorithms, BlocksReadInPlaceGoAtOnceUnlessSetOff) {
  SKIP_WHERE_THE_KERNEL_FORBIDS_READS();
  CheckPathTaken(4096, BlocksAtOnce::kAuto, true);
  CheckPathTaken(4096, BlocksAtOnce::kOff, false);
  CheckPathTaken(4096, BlocksAtOnce::kOn, true);
}

// Two ranks that read each other on request exchange an allgather's or an
// alltoall's blocks in place once both blocks (each rank's send) are at
// least kPairInPlaceBytes, and through the slots below (one block short
// by a byte or two, or empty); in-place allgathers too. The results match
// every way (blocks of odd sizes: a last segment of a byte or three).
TEST(ShmAlgorithms, TwoRanksExchangeLargeBlocksInPlace) {
  SKIP_WHERE_THE_KERNEL_FORBIDS_READS();
  const size_t t = kPairInPlaceBytes;
  RunRanks(
      2, UniqueJobId("pair-in-place"),
      [&](Transport& tr) {
        Posts posts(tr);
        Comm comm(posts, WaitPolicy{std::chrono::seconds(120)}, 256 << 10);
        const std::string rank = "rank " + std::to_string(tr.rank()) + ": ";
        auto allgather = [&](size_t count, size_t empty, bool pair) {
          posts.Start(comm);
          CheckAllgather(comm, count, empty);  // blocks count and count + 1
          EXPECT_EQ(posts.named(), rank + (pair ? "allgather (pair_in_place)" : "allgather (ring)"))
              << count;
          EXPECT_EQ(posts.in_place_sends() > 0, pair) << count;
        };
        allgather(t, SIZE_MAX, true);
        allgather(3 * t + 2, SIZE_MAX, true);
        allgather(t - 1, SIZE_MAX, false);
        allgather(3 * t, /*empty=*/1, false);
        auto alltoall = [&](size_t count, bool pair) {
          posts.Start(comm);
          CheckAlltoall(comm, count);  // rank 0 sends count + 2, rank 1 count + 1
          EXPECT_EQ(posts.named(),
                    rank + (pair ? "alltoall (pair_in_place)" : "alltoall (pairwise)"))
              << count;
          EXPECT_EQ(posts.in_place_sends() > 0, pair) << count;
        };
        alltoall(t - 1, true);
        alltoall(2 * t + 5, true);
        alltoall(t - 2, false);
        posts.Start(comm);
        CheckAllgatherInPlace(comm, {t + 3, 2 * t + 1});
        EXPECT_EQ(posts.named(), rank + "allgather (pair_in_place)");
      },
      [&](int) {
        ShmOptions o = shm_test::Options(0);
        o.single_copy_on_request = true;
        return o;
      });
}

}  // namespace
}  // namespace hora
