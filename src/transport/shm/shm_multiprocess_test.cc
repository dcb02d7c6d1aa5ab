// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The shm transport between real processes: two forked children rendezvous
// through a tiny file-based Store (below), exchange messages both ways and
// run a ring and a shared-window allreduce, through the slots and in a
// single copy (each reading the other's memory), and exchange an
// allgather's and an alltoall's large blocks read in place on request
// (pair_in_place.h). Children report through their exit codes.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "collectives/algorithms.h"
#include "collectives/pair_in_place.h"
#include "support/file_store.h"
#include "support/forwarding_transport.h"
#include "support/shm_test_util.h"
#include "transport/shm/shm_transport_impl.h"

namespace hora {
namespace {

uint8_t Byte(int rank, size_t i) { return static_cast<uint8_t>(rank * 101 + i * 13 + (i >> 9)); }

// A child's exit code where it could not read its peer's memory.
constexpr int kUnreadable = 10;

// Whether Yama's ptrace_scope may forbid one process reading another (two
// forked siblings); 0, or no Yama, allows it to processes of one user.
bool YamaMayForbidReads() {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  return f && (f >> scope) && scope != 0;
}

// The body of one child process; returns its exit code.
// Counts the sends asked to be read in place.
class CountsInPlace final : public testing::ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  Request IsendInPlace(int peer, Tag tag, const void* data, size_t bytes) override {
    ++in_place;
    return ForwardingTransport::IsendInPlace(peer, tag, data, bytes);
  }
  int in_place = 0;
};

// Rank `rank`'s allgather block (`bytes`) and alltoall blocks, checked on
// the other side; 0, or the exit code of what failed.
int ExchangeInPlace(Comm& comm, int rank) {
  const size_t bytes[2] = {kPairInPlaceBytes + 5, 3 * kPairInPlaceBytes + 1};
  const auto r = static_cast<size_t>(rank);
  std::vector<uint8_t> mine(bytes[r]), all(bytes[0] + bytes[1]);
  for (size_t i = 0; i < bytes[r]; ++i) mine[i] = Byte(rank + 2, i);
  Status st = AllgatherRing(comm, mine.data(), all.data(), bytes);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 11;
  }
  for (size_t q = 0, off = 0; q < 2; off += bytes[q], ++q) {
    for (size_t i = 0; i < bytes[q]; ++i) {
      if (all[off + i] != Byte(static_cast<int>(q) + 2, i)) return 12;
    }
  }
  // Alltoall: rank r sends bytes[r] to each rank, its own first.
  const size_t send[2] = {bytes[r], bytes[r]}, recv[2] = {bytes[0], bytes[1]};
  std::vector<uint8_t> in(2 * bytes[r]), out(bytes[0] + bytes[1]);
  for (size_t i = 0; i < in.size(); ++i) in[i] = Byte(rank + 4, i);
  st = AlltoallPairwise(comm, in.data(), send, out.data(), recv);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 13;
  }
  // From rank q: its block for this rank, at q's offset r * bytes[q].
  for (size_t q = 0, off = 0; q < 2; off += bytes[q], ++q) {
    for (size_t i = 0; i < bytes[q]; ++i) {
      if (out[off + i] != Byte(static_cast<int>(q) + 4, r * bytes[q] + i)) return 14;
    }
  }
  return 0;
}

int Child(int rank, const std::string& dir, const std::string& job, size_t single_copy,
          bool on_request) {
  testing::FileStore store(dir);
  ShmOptions options = shm_test::Options(single_copy);
  options.single_copy_on_request = on_request;
  auto t = CreateShmTransport(rank, 2, store, job, options);
  if (!t.ok()) {
    std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
    return 2;
  }
  Transport& tr = **t;
  const int peer = 1 - rank;
  // Single copy asked for: the probe must have found the peer readable.
  if (static_cast<ShmTransport&>(tr).link(peer).direct_min_bytes != single_copy ||
      tr.ReadsOnRequest(rank, peer) != on_request || tr.ReadsOnRequest(peer, rank) != on_request) {
    return kUnreadable;
  }
  const size_t n = (5 << 20) + 3;
  std::vector<uint8_t> out(n), in(n);
  for (size_t i = 0; i < n; ++i) out[i] = Byte(rank, i);
  Request r = tr.Irecv(peer, 1, in.data(), n);
  Request s = tr.Isend(peer, 1, out.data(), n);
  const TimePoint deadline = Clock::now() + std::chrono::seconds(60);
  Status st = tr.Wait(r, deadline);
  if (st.ok()) st = tr.Wait(s, deadline);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 3;
  }
  for (size_t i = 0; i < n; ++i) {
    if (in[i] != Byte(peer, i)) return 4;
  }
  Comm comm(tr, WaitPolicy{std::chrono::seconds(60)}, 256 << 10);
  std::vector<float> data(1 << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>((rank + 1) * (i % 5));
  st = AllreduceRing(comm, {data.data(), data.data(), data.size(), DataType::kFloat32, {}});
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 5;
  }
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] != static_cast<float>(3 * (i % 5))) return 6;
  }
  // The same on the shared window, which each process maps at addresses of
  // its own: a large (two-step chunks) and a small (one-step) message.
  Comm shared(tr, WaitPolicy{std::chrono::seconds(60)}, 256 << 10, 1);
  if (shared.window() == nullptr) return 7;
  for (size_t count : {size_t{1} << 20, size_t{5}}) {
    for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((rank + 1) * (i % 5));
    st = AllreduceShared(shared, {data.data(), data.data(), count, DataType::kFloat32, {}});
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      return 8;
    }
    for (size_t i = 0; i < count; ++i) {
      if (data[i] != static_cast<float>(3 * (i % 5))) return 9;
    }
  }
  // The exchanges over a transport that counts in-place sends: two ranks
  // that read each other on request exchange their large blocks so.
  CountsInPlace counting(tr);
  Comm counted(counting, WaitPolicy{std::chrono::seconds(60)}, 256 << 10, /*context=*/3);
  if (const int code = ExchangeInPlace(counted, rank); code != 0) return code;
  return (counting.in_place > 0) == on_request ? 0 : 15;
}

void ForkTwo(size_t single_copy, bool on_request = false) {
  char tmpl[] = "/tmp/hora-shm-store-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, job = shm_test::UniqueJobId("fork");
  pid_t pids[2];
  for (int r = 0; r < 2; ++r) {
    pids[r] = fork();
    ASSERT_GE(pids[r], 0);
    if (pids[r] == 0) _exit(Child(r, dir, job, single_copy, on_request));
  }
  const TimePoint deadline = Clock::now() + std::chrono::seconds(240);
  bool skipped = false;
  for (int r = 0; r < 2; ++r) {
    int status = 0;
    pid_t done = 0;
    while ((done = waitpid(pids[r], &status, WNOHANG)) == 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (done == 0) {
      kill(pids[r], SIGKILL);
      waitpid(pids[r], &status, 0);
      ADD_FAILURE() << "rank " << r << " did not finish in time";
      continue;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == kUnreadable && YamaMayForbidReads()) {
      skipped = true;  // (after both children are reaped)
      continue;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << r << " exit status " << status << " (see its stderr)";
  }
  if (skipped) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "kernel.yama.ptrace_scope forbids these processes to read each other";
  }
  EXPECT_TRUE(ListShmSegments(job).empty());
  (void)RemoveShmSegments(job);  // only matters if a child was killed mid-rendezvous
  std::filesystem::remove_all(dir);
}

TEST(ShmMultiProcess, TwoForkedProcessesExchangeAndAllreduce) { ForkTwo(0); }

TEST(ShmMultiProcess, TwoForkedProcessesReadEachOthersMessagesDirectly) { ForkTwo(64 << 10); }
TEST(ShmMultiProcess, TwoForkedProcessesReadEachOthersBlocksOnRequest) { ForkTwo(0, true); }

}  // namespace
}  // namespace hora
