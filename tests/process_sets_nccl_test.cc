// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Process sets that share ranks make their NCCL calls in one order on every
// rank (device/nccl_order.h), on the host device's NCCL (HORA_DEVICE=host,
// HORA_NCCL_LIBRARY=host). Its calls wait on the host until every rank of
// the communicator made them, inside the set's turn: that is a GPU that
// runs one NCCL kernel at a time, where two sets' calls made in different
// orders on two ranks wait for each other for good (here: until
// HORA_TIMEOUT_S, then errors). Ranks are threads; every rank submits its
// sets' collectives in one order, several rounds before it waits, and each
// set's engine decides on its own when they are ready. Every result is
// checked against the values the ranks gave.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/session_impl.h"
#include "doubles/host_device.h"
#include "support/device_io.h"
#include "support/thread_ranks.h"

namespace hora::testing {
namespace {

constexpr auto kForever = std::chrono::nanoseconds::max();

Settings NcclOnTheHost() {
  return TestSettings({{"HORA_DEVICE", "host"},
                       {"HORA_GPU_BACKEND", "nccl"},
                       {"HORA_NCCL_LIBRARY", "host"},
                       {"HORA_GPU_IPC", "0"},
                       // A wait for each other ends in errors, not a hang.
                       {"HORA_TIMEOUT_S", "20"}});
}

std::vector<float> Floats(const std::vector<uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

Status Expect(const std::vector<float>& got, const std::vector<float>& want,
              const std::string& what) {
  if (got.size() != want.size()) {
    return InternalError(what + ": " + std::to_string(got.size()) + " elements, not " +
                         std::to_string(want.size()));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      return InternalError(what + ": element " + std::to_string(i) + " is " +
                           std::to_string(got[i]) + ", not " + std::to_string(want[i]));
    }
  }
  return Status::Ok();
}

// Sets A (ranks 0, 1) and B (ranks 0, 2) of a job of 3: their ids.
struct SetsAB {
  int a = -1;
  int b = -1;
};
SetsAB AddSetsAB(ThreadRanks& job) {
  std::vector<SetsAB> ids(3);
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    const std::vector<int> a_ranks{0, 1}, b_ranks{0, 2};
    HORA_ASSIGN_OR_RETURN(ids[static_cast<size_t>(r)].a, s.AddProcessSet(a_ranks));
    HORA_ASSIGN_OR_RETURN(ids[static_cast<size_t>(r)].b, s.AddProcessSet(b_ranks));
    return Status::Ok();
  }));
  return ids[0];
}

// A rank's float32 tensors of `count` elements on its GPU, and their check.
class Floats32 {
 public:
  Floats32(DeviceIo& io, int64_t count) : io_(io), count_(count) {}
  TensorView Of(float v) {
    const std::vector<float> given(static_cast<size_t>(count_), v);
    return OnGpu(io_.Upload(given.data(), static_cast<size_t>(count_) * 4), DataType::kFloat32,
                 {count_});
  }
  Status SumIs(const TensorView& t, float want, const std::string& what) {
    return Expect(Floats(io_.Download(t.data(), static_cast<size_t>(count_) * 4)),
                  std::vector<float>(static_cast<size_t>(count_), want), what);
  }

 private:
  DeviceIo& io_;
  const int64_t count_;
};

class ProcessSetsOnNccl : public ::testing::TestWithParam<int> {};

// Three sets beside the global one, each pair sharing a rank (at 3 ranks,
// a cycle of three sets: no two of them share two ranks, and still calls
// in different orders would wait in a circle), an allreduce, an allgather
// and a broadcast among them, 12 rounds, 3 submitted before each wait.
TEST_P(ProcessSetsOnNccl, SetsSharingRanksCallNcclInOneOrder) {
  const int n = GetParam();
  const std::vector<std::vector<int>> members =
      n == 3 ? std::vector<std::vector<int>>{{0, 1}, {1, 2}, {0, 2}}
             : std::vector<std::vector<int>>{{0, 1, 2}, {1, 2, 3}, {0, 3}};
  ThreadRanks job(n, NcclOnTheHost());
  std::vector<std::vector<int>> ids(static_cast<size_t>(n));
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    for (const std::vector<int>& m : members) {
      HORA_ASSIGN_OR_RETURN(const int id, s.AddProcessSet(m));
      ids[static_cast<size_t>(r)].push_back(id);
    }
    return Status::Ok();
  }));
  const std::vector<int> sets = ids[0];
  constexpr int64_t kCount = 1031;
  constexpr int kRounds = 12;
  constexpr int kAhead = 3;  // rounds submitted before they are waited for
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    auto in = [&](size_t k) {
      const std::vector<int>& m = members[k];
      return std::find(m.begin(), m.end(), r) != m.end();
    };
    // What a rank gives in round i: its rank and round in every element.
    auto value = [](int rank, int i) { return static_cast<float>(rank * 100 + i); };
    struct Round {
      std::vector<void*> buffers;
      std::vector<Handle> handles;
    };
    auto submit = [&](int i) {
      Round round;
      const std::string k = std::to_string(i);
      auto buffer = [&] {
        const std::vector<float> mine(kCount, value(r, i));
        void* d = io.Upload(mine.data(), kCount * 4);
        round.buffers.push_back(d);
        return OnGpu(d, DataType::kFloat32, {kCount});
      };
      // One order on every rank: the global set, then the sets in turn.
      const TensorView g = buffer();
      round.handles.push_back(s.AllreduceAsync("global." + k, g, g, {ReduceOp::kSum}));
      if (in(0)) {
        const TensorView v = buffer();
        round.handles.push_back(s.AllreduceAsync("a." + k, v, v, {ReduceOp::kSum}, sets[0]));
      }
      if (in(1)) round.handles.push_back(s.AllgatherAsync("b." + k, buffer(), sets[1]));
      if (in(2)) {
        round.handles.push_back(s.BroadcastAsync("c." + k, buffer(), members[2][0], sets[2]));
      }
      return round;
    };
    auto check = [&](int i, Round& round) -> Status {
      const std::string k = std::to_string(i);
      for (Handle& h : round.handles) HORA_RETURN_IF_ERROR(h.Wait(kForever));
      auto sum_over = [&](const std::vector<int>& ranks) {
        float sum = 0;
        for (int q : ranks) sum += value(q, i);
        return std::vector<float>(kCount, sum);
      };
      std::vector<int> everyone(static_cast<size_t>(n));
      std::iota(everyone.begin(), everyone.end(), 0);
      size_t b = 0, h = 1;
      HORA_RETURN_IF_ERROR(Expect(Floats(io.Download(round.buffers[b++], kCount * 4)),
                                  sum_over(everyone), "global." + k));
      if (in(0)) {
        HORA_RETURN_IF_ERROR(Expect(Floats(io.Download(round.buffers[b++], kCount * 4)),
                                    sum_over(members[0]), "a." + k));
        ++h;
      }
      if (in(1)) {
        ++b;
        std::optional<Tensor> out = round.handles[h++].TakeOutput();
        if (!out) return InternalError("b." + k + ": no output");
        std::vector<float> want;
        for (int q : members[1]) want.insert(want.end(), kCount, value(q, i));
        HORA_RETURN_IF_ERROR(
            Expect(Floats(io.Download(out->data(), out->num_bytes())), want, "b." + k));
      }
      if (in(2)) {
        HORA_RETURN_IF_ERROR(Expect(Floats(io.Download(round.buffers[b++], kCount * 4)),
                                    std::vector<float>(kCount, value(members[2][0], i)), "c." + k));
      }
      return Status::Ok();
    };
    for (int first = 0; first < kRounds; first += kAhead) {
      std::vector<Round> rounds;
      for (int i = first; i < first + kAhead; ++i) rounds.push_back(submit(i));
      for (int i = first; i < first + kAhead; ++i) {
        HORA_RETURN_IF_ERROR(check(i, rounds[static_cast<size_t>(i - first)]));
      }
    }
    return Status::Ok();
  }));
  // Every set's collectives went through NCCL, on every rank in it.
  for (size_t k = 0; k < members.size(); ++k) {
    for (int r : members[k]) {
      EXPECT_GT(job.session(r).engine_counters(sets[k]).nccl_batches, 0u)
          << "rank " << r << ", set " << sets[k];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, ProcessSetsOnNccl, ::testing::Values(3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "np" + std::to_string(info.param);
                         });

// A tensor of another set submitted before, but late on that set's other
// rank: rank 0 submits set B's tensor before set A's, and rank 2 its part
// of B 0.5 s late. Rank 0 makes A's call only after B's ran; rank 1, which
// made A's call at once (and here waits for it on the host), gets its
// result then. Nothing fails: the wait is well within HORA_TIMEOUT_S.
TEST(ProcessSetsOnNcclTurns, ALateTensorOfAnotherSetDelaysTheCallButFailsNothing) {
  ThreadRanks job(3, NcclOnTheHost());
  const SetsAB sets = AddSetsAB(job);
  constexpr int64_t kCount = 257;
  constexpr auto kLate = std::chrono::milliseconds(500);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::chrono::steady_clock::duration> a_done(3);
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    Floats32 f(io, kCount);
    if (r == 2) {
      std::this_thread::sleep_for(kLate);
      const TensorView t = f.Of(2);
      HORA_RETURN_IF_ERROR(s.AllreduceAsync("b", t, t, {ReduceOp::kSum}, sets.b).Wait(kForever));
      return f.SumIs(t, 3, "b");
    }
    Handle of_b;
    const TensorView tb = f.Of(1);
    if (r == 0) of_b = s.AllreduceAsync("b", tb, tb, {ReduceOp::kSum}, sets.b);
    const TensorView ta = f.Of(static_cast<float>(r + 1));
    HORA_RETURN_IF_ERROR(s.AllreduceAsync("a", ta, ta, {ReduceOp::kSum}, sets.a).Wait(kForever));
    a_done[static_cast<size_t>(r)] = std::chrono::steady_clock::now() - start;
    HORA_RETURN_IF_ERROR(f.SumIs(ta, 3, "a"));
    if (r == 0) {
      HORA_RETURN_IF_ERROR(of_b.Wait(kForever));
      HORA_RETURN_IF_ERROR(f.SumIs(tb, 3, "b"));
    }
    return Status::Ok();
  }));
  // (Without the order, rank 0 would have made A's call at once.)
  EXPECT_GE(a_done[0], kLate);
  EXPECT_GE(a_done[1], kLate);
}

// A set removed while its batch waits for its turn (device/nccl_order.h):
// rank 0 submits set B's tensor before set A's, and B's other rank (2)
// submits its part only after the removal. Rank 1 made A's call at once and
// waits in it for rank 0. When set A is removed, rank 0's engine stops: its
// batch, still waiting, makes no call and fails, saying why, and rank 0
// aborts its communicator (device_nccl.h), so rank 1's call ends in an
// error naming rank 0 instead of waiting for a call that never comes. The
// rest of the job goes on: B's allreduce, and the global set's, are whole.
TEST(ProcessSetsOnNcclTurns, ASetRemovedWhileItsBatchAwaitsItsTurnFailsItOnEveryRank) {
  ThreadRanks job(3, NcclOnTheHost());
  const SetsAB sets = AddSetsAB(job);
  constexpr int64_t kCount = 129;
  // (Long enough for rank 1 to be in A's call, and rank 0's batch to wait
  // for its turn, on a loaded machine under ThreadSanitizer too.)
  constexpr auto kWaiting = std::chrono::milliseconds(1500);
  const auto start = std::chrono::steady_clock::now();
  std::vector<Status> of_a(3);
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    Floats32 f(io, kCount);
    Handle hb, ha;
    const TensorView tb = f.Of(static_cast<float>(r + 1));
    const TensorView ta = f.Of(static_cast<float>(r + 1));
    if (r == 0) hb = s.AllreduceAsync("b", tb, tb, {ReduceOp::kSum}, sets.b);
    if (r != 2) ha = s.AllreduceAsync("a", ta, ta, {ReduceOp::kSum}, sets.a);
    std::this_thread::sleep_for(kWaiting);
    if (r == 0 && ha.Finished()) return InternalError("'a' did not wait for its turn behind 'b'");
    HORA_RETURN_IF_ERROR(s.RemoveProcessSet(sets.a));
    if (r != 2) of_a[static_cast<size_t>(r)] = ha.Wait(std::chrono::seconds(10));
    // The job goes on: set B's allreduce (its turn no longer blocks
    // anything), then the global set's.
    if (r == 2) hb = s.AllreduceAsync("b", tb, tb, {ReduceOp::kSum}, sets.b);
    if (r != 1) {
      HORA_RETURN_IF_ERROR(hb.Wait(std::chrono::seconds(10)));
      HORA_RETURN_IF_ERROR(f.SumIs(tb, 4, "b"));
    }
    const TensorView tg = f.Of(static_cast<float>(r + 1));
    HORA_RETURN_IF_ERROR(
        s.AllreduceAsync("g", tg, tg, {ReduceOp::kSum}).Wait(std::chrono::seconds(10)));
    return f.SumIs(tg, 6, "g");
  }));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(9))
      << "a rank waited toward the timeout";
  EXPECT_EQ(of_a[0].code(), StatusCode::kAborted) << of_a[0].ToString();
  EXPECT_NE(of_a[0].message().find("the engine stopped while this batch waited for its turn"),
            std::string::npos)
      << of_a[0].ToString();
  EXPECT_FALSE(of_a[1].ok());
  EXPECT_NE(of_a[1].message().find("rank 0 aborted it"), std::string::npos) << of_a[1].ToString();
}

// The order holds on the GPU too (device/nccl_order.h), though each set
// works on a stream of its own: here on the host device's NCCL with its
// calls queued on the streams, as a GPU's kernels are
// (HORA_NCCL_LIBRARY=host:queued). Rank 0 submits set A's allreduce (out of
// place: its first work on the GPU is a copy within the device) and then
// set B's (in place); ranks 1 (A) and 2 (B) theirs. Rank 0's copies within
// the device are held back, so A's calls wait on its stream behind the
// copy. B's calls come after A's turn, on B's stream, which must wait for
// A's calls: until the copy is let go, B's handles are not done on rank 0
// or on rank 2, whose calls wait for rank 0's. Then both sums are right.
// (Without the wait, B ran on rank 0's GPU before A, tried: a GPU that runs
// one NCCL kernel at a time could wait for good there.)
TEST(ProcessSetsOnNcclTurns, ALaterTurnWaitsOnTheGpuForTheEarlierOne) {
  Settings settings = NcclOnTheHost();
  settings["HORA_NCCL_LIBRARY"] = "host:queued";
  ThreadRanks job(3, settings);
  const SetsAB sets = AddSetsAB(job);
  constexpr int64_t kCount = 1031;
  std::barrier meet(3);
  std::vector<int> b_done_early(3, -1);
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    DeviceIo io(s);
    auto* device = io.ok() ? dynamic_cast<gpu::HostDevice*>(&io.device()) : nullptr;
    if (device == nullptr) {
      meet.arrive_and_drop();
      return io.ok() ? InternalError("not the host device") : io.error();
    }
    Floats32 f(io, kCount);
    if (r == 0) device->HoldCopies(gpu::CopyKind::kDeviceToDevice);
    const TensorView a_in = f.Of(static_cast<float>(r + 1));
    const TensorView a_out = f.Of(0);
    const TensorView b = f.Of(static_cast<float>(10 * (r + 1)));
    Handle ha, hb;
    if (r != 2) ha = s.AllreduceAsync("a", a_in, a_out, {ReduceOp::kSum}, sets.a);
    if (r != 1) hb = s.AllreduceAsync("b", b, b, {ReduceOp::kSum}, sets.b);
    // B's calls are queued once its handles have finished on the host.
    Status st;
    if (r != 1) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
      while (!hb.Finished() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (!hb.Finished()) st = InternalError("b's calls were not made");
    }
    meet.arrive_and_wait();
    // (A second for B's work to end, where it would not wait for A's.)
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (r != 1 && !hb.Poll() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (r != 1) b_done_early[static_cast<size_t>(r)] = hb.Poll() ? 1 : 0;
    meet.arrive_and_wait();
    if (r == 0) device->ReleaseCopies();
    HORA_RETURN_IF_ERROR(st);
    if (r != 2) {
      HORA_RETURN_IF_ERROR(ha.Wait(std::chrono::seconds(15)));
      HORA_RETURN_IF_ERROR(f.SumIs(a_out, 3, "a"));
    }
    if (r != 1) {
      HORA_RETURN_IF_ERROR(hb.Wait(std::chrono::seconds(15)));
      HORA_RETURN_IF_ERROR(f.SumIs(b, 40, "b"));
    }
    return Status::Ok();
  }));
  for (int r : {0, 2}) {
    EXPECT_EQ(b_done_early[static_cast<size_t>(r)], 0)
        << "rank " << r << ": set B's NCCL work ended while set A's, queued before it on rank "
        << "0, was held back";
  }
}

}  // namespace
}  // namespace hora::testing
