// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A rank whose NCCL call fails, end to end, on the host device's NCCL
// (HORA_DEVICE=host; rank 1's library refuses its third call:
// HORA_NCCL_LIBRARY=host:refuse-call=3, or its GPU faults after a copy was
// queued: the last test). Ranks are threads. What follows
// (device/device_nccl.h, batch_verdict.h):
//  - that batch fails on every rank: rank 1 with the refusal, the others
//    (their calls waiting for rank 1's) naming rank 1, which aborted the
//    communicator;
//  - the next NCCL batch fails on every rank, each saying its communicator
//    was aborted, and every rank makes a new one;
//  - the batches after that run on the new communicator, with the right
//    results, allreduce, broadcast and allgather alike.
// Nothing waits past a few seconds: HORA_TIMEOUT_S is 20, and no rank comes
// near it.
#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api/session_impl.h"
#include "doubles/host_device.h"
#include "support/device_io.h"
#include "support/thread_ranks.h"

namespace hora::testing {
namespace {

using namespace std::chrono_literals;

Settings RefusingRank(int r) {
  return TestSettings({{"HORA_DEVICE", "host"},
                       {"HORA_GPU_BACKEND", "nccl"},
                       {"HORA_NCCL_LIBRARY", r == 1 ? "host:refuse-call=3" : "host"},
                       {"HORA_GPU_IPC", "0"},
                       {"HORA_TIMEOUT_S", "20"}});
}

// Rank r's settings where rank 1's host NCCL, its calls queued on the
// stream as a GPU's are, refuses its third call; `timeout` is
// HORA_TIMEOUT_S, and `extra` goes on top.
Settings QueuedRefusingRank(int r, const std::string& timeout, const Settings& extra = {}) {
  Settings s =
      TestSettings({{"HORA_DEVICE", "host"},
                    {"HORA_GPU_BACKEND", "nccl"},
                    {"HORA_NCCL_LIBRARY", r == 1 ? "host:queued:refuse-call=3" : "host:queued"},
                    {"HORA_GPU_IPC", "0"},
                    {"HORA_TIMEOUT_S", timeout}});
  for (const auto& [k, v] : extra) s[k] = v;
  return s;
}

bool Has(const Status& st, const std::string& text) {
  return st.message().find(text) != std::string::npos;
}

// Whether `io`'s `count` float32 at `d` all are `want`; the error names
// step `step`.
Status AllAre(DeviceIo& io, const void* d, int64_t count, float want, int step) {
  const std::vector<uint8_t> bytes = io.Download(d, static_cast<size_t>(count) * 4);
  for (int64_t k = 0; k < count; ++k) {
    float got;
    std::memcpy(&got, bytes.data() + k * 4, 4);
    if (got != want) {
      return InternalError("step " + std::to_string(step) + ": element " + std::to_string(k) +
                           " is " + std::to_string(got) + ", not " + std::to_string(want));
    }
  }
  return Status::Ok();
}

// A small step of the queued-NCCL tests: rank r's float32 tensor (every
// element r + 1) of kStepCount elements, on the device.
constexpr int64_t kStepCount = 259;
void* StepTensor(DeviceIo& io, int r) {
  const std::vector<float> given(kStepCount, static_cast<float>(r + 1));
  return io.Upload(given.data(), kStepCount * 4);
}
TensorView StepView(void* d) { return OnGpu(d, DataType::kFloat32, {kStepCount}); }

// Step `i`'s allreduce (sum, in place) of `d` (a StepTensor), waited for at
// most `wait` and checked (among `n` ranks).
Status SumStep(Session& s, DeviceIo& io, void* d, int i, int n, std::chrono::seconds wait) {
  Status st =
      s.AllreduceAsync("step." + std::to_string(i), StepView(d), StepView(d), {ReduceOp::kSum})
          .Wait(wait);
  if (st.ok()) st = AllAre(io, d, kStepCount, static_cast<float>(n * (n + 1) / 2), i);
  return st;
}

// Rank r's steps 0 and 1 whole, and its step 2 failed: on rank 1 with its
// refused call, on the others aborted, saying `others_say`. Whether there
// is more to check (not on rank 1).
bool ExpectStep2Refused(const std::vector<Status>& st, int r, const std::string& others_say) {
  EXPECT_TRUE(st[0].ok()) << st[0].ToString();
  EXPECT_TRUE(st[1].ok()) << st[1].ToString();
  EXPECT_FALSE(st[2].ok());
  if (r == 1) {
    EXPECT_TRUE(Has(st[2], "rank 1 refused its call 3")) << st[2].ToString();
    return false;
  }
  EXPECT_EQ(st[2].code(), StatusCode::kAborted) << st[2].ToString();
  EXPECT_TRUE(Has(st[2], others_say)) << st[2].ToString();
  return true;
}

// A step that failed on every rank because of rank 1: rank 1's error says
// `rank1_says`; the others', that rank 1 aborted the communicator.
void ExpectFailedByRank1(const Status& st, int r, const std::string& rank1_says) {
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(Has(st, r == 1 ? rank1_says : "rank 1 aborted it")) << st.ToString();
}

class NcclFaults : public ::testing::TestWithParam<int> {};

TEST_P(NcclFaults, ARanksFailedCallIsToldAndEveryRankStartsAnew) {
  const int n = GetParam();
  ThreadRanks job(n, RefusingRank);
  constexpr int64_t kCount = 1031;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::vector<Status>> results(static_cast<size_t>(n));
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    std::vector<Status>& mine = results[static_cast<size_t>(r)];
    for (int i = 0; i < 6; ++i) {
      const std::vector<float> given(kCount, static_cast<float>(r + 1 + i));
      void* d = io.Upload(given.data(), kCount * 4);
      const TensorView v = OnGpu(d, DataType::kFloat32, {kCount});
      Status st = s.AllreduceAsync("step." + std::to_string(i), v, v, {ReduceOp::kSum})
                      .Wait(std::chrono::nanoseconds::max());
      float want = 0;
      for (int q = 0; q < n; ++q) want += static_cast<float>(q + 1 + i);
      if (st.ok()) st = AllAre(io, d, kCount, want, i);
      mine.push_back(st);
    }
    // The new communicator takes the other collectives too.
    std::vector<float> root(kCount, r == 0 ? 7.0f : -1.0f);
    void* b = io.Upload(root.data(), kCount * 4);
    HORA_RETURN_IF_ERROR(
        s.BroadcastAsync("after.b", OnGpu(b, DataType::kFloat32, {kCount}), 0).Wait(10s));
    std::vector<uint8_t> got = io.Download(b, kCount * 4);
    float first;
    std::memcpy(&first, got.data(), 4);
    if (first != 7.0f) return InternalError("broadcast after: " + std::to_string(first));
    const std::vector<float> part(3, static_cast<float>(r));
    void* g = io.Upload(part.data(), 12);
    Handle h = s.AllgatherAsync("after.g", OnGpu(g, DataType::kFloat32, {3}));
    HORA_RETURN_IF_ERROR(h.Wait(10s));
    std::optional<Tensor> all = h.TakeOutput();
    if (!all || all->num_bytes() != static_cast<size_t>(12 * n)) {
      return InternalError("allgather after: no output of " + std::to_string(12 * n) + " bytes");
    }
    got = io.Download(all->data(), all->num_bytes());
    for (int q = 0; q < n; ++q) {
      float v;
      std::memcpy(&v, got.data() + q * 12, 4);
      if (v != static_cast<float>(q))
        return InternalError("allgather after: rank " + std::to_string(q) + "'s part");
    }
    return Status::Ok();
  }));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s) << "a rank waited toward the timeout";
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::vector<Status>& st = results[static_cast<size_t>(r)];
    ASSERT_EQ(st.size(), 6u);
    EXPECT_TRUE(st[0].ok()) << st[0].ToString();
    EXPECT_TRUE(st[1].ok()) << st[1].ToString();
    // The refused call: its batch fails on every rank, naming rank 1.
    ExpectFailedByRank1(st[2], r, "rank 1 refused its call 3");
    // The next: every rank's communicator was aborted; each says so.
    EXPECT_FALSE(st[3].ok());
    EXPECT_TRUE(Has(st[3], "aborted")) << st[3].ToString();
    // Then a new communicator, and the right sums.
    EXPECT_TRUE(st[4].ok()) << st[4].ToString();
    EXPECT_TRUE(st[5].ok()) << st[5].ToString();
  }
  EXPECT_GT(job.session(0).engine_counters().nccl_batches, 4u);
}

// A copy that faults on rank 1's GPU after it was queued (the host
// device's injected fault, as a copy from freed memory), before the NCCL
// call of its batch: the copy's call returned, so every rank said it could
// make the call (batch_verdict.h). Rank 1's call then finds its device
// broken and fails, and rank 1 aborts its communicator: that batch fails on
// every rank, rank 1's naming the fault, the others' naming rank 1. A GPU
// stays broken after such a fault (CUDA's sticky errors), so the next NCCL
// batch fails on every rank too, naming rank 1, which cannot take part.
// Nothing waits toward the timeout, and the ranks' host collectives go on.
TEST_P(NcclFaults, AGpuFaultAfterTheCopyWasQueuedFailsTheBatchOnEveryRank) {
  const int n = GetParam();
  ThreadRanks job(n, TestSettings({{"HORA_DEVICE", "host"},
                                   {"HORA_GPU_BACKEND", "nccl"},
                                   {"HORA_NCCL_LIBRARY", "host"},
                                   {"HORA_GPU_IPC", "0"},
                                   {"HORA_TIMEOUT_S", "20"}}));
  constexpr int64_t kCount = 517;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::vector<Status>> results(static_cast<size_t>(n));
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    auto* device = dynamic_cast<gpu::HostDevice*>(&io.device());
    if (device == nullptr) return InternalError("not the host device");
    std::vector<Status>& mine = results[static_cast<size_t>(r)];
    // (Every buffer is made before the fault: rank 1's device refuses
    // copies after it.)
    const std::vector<float> given(kCount, static_cast<float>(r + 1));
    std::vector<void*> ins, outs;
    for (int i = 0; i < 3; ++i) {
      ins.push_back(io.Upload(given.data(), kCount * 4));
      outs.push_back(io.Upload(nullptr, kCount * 4));
    }
    for (int i = 0; i < 3; ++i) {
      // Out of place: the batch's first work on the GPU is a device copy.
      void* in = ins[static_cast<size_t>(i)];
      void* out = outs[static_cast<size_t>(i)];
      if (r == 1 && i == 1) device->FaultNextDeviceCopy();
      Status st =
          s.AllreduceAsync("step." + std::to_string(i), OnGpu(in, DataType::kFloat32, {kCount}),
                           OnGpu(out, DataType::kFloat32, {kCount}), {ReduceOp::kSum})
              .Wait(std::chrono::seconds(15));
      if (st.ok()) st = AllAre(io, out, kCount, static_cast<float>(n * (n + 1) / 2), i);
      mine.push_back(st);
    }
    // The host collectives go on, on every rank.
    std::vector<float> host(3, static_cast<float>(r));
    const TensorView v(host.data(), DataType::kFloat32, {3});
    HORA_RETURN_IF_ERROR(s.AllreduceAsync("host", v, v, {ReduceOp::kSum}).Wait(10s));
    if (host[2] != static_cast<float>(n * (n - 1) / 2)) return InternalError("host allreduce");
    return Status::Ok();
  }));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 8s) << "a rank waited toward the timeout";
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::vector<Status>& st = results[static_cast<size_t>(r)];
    ASSERT_EQ(st.size(), 3u);
    EXPECT_TRUE(st[0].ok()) << st[0].ToString();
    ExpectFailedByRank1(st[1], r, "faulted on the device");
    EXPECT_FALSE(st[2].ok());
    EXPECT_TRUE(Has(st[2], "rank 1")) << st[2].ToString();
  }
}

// As NCCL does on a GPU: the host device's NCCL queues each call on the
// rank's stream, where it waits for the other ranks, and an abort ends only
// the aborting rank's calls (HORA_NCCL_LIBRARY=host:queued). Rank 1's
// library refuses its third call: rank 1 aborts its communicator, but the
// others' calls are queued and wait for it, and no NCCL batch follows for
// rank 1 to say so before. Their handles, waited on, would wait for good:
// the engine watches NCCL's work (DeviceStaging::WatchNccl), and at
// HORA_TIMEOUT_S (4 s here) aborts the communicator, failing that batch,
// naming why. The next batch then fails on every rank (the communicators
// were aborted), and the ones after run on new communicators.
TEST_P(NcclFaults, OthersQueuedWorkEndsAtTheTimeoutWhenARanksCallFails) {
  const int n = GetParam();
  ThreadRanks job(n, [](int r) {
    return QueuedRefusingRank(r, "4", {{"HORA_STALL_WARNING_S", "1"}});
  });
  constexpr int64_t kCount = 259;
  ::testing::internal::CaptureStderr();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::vector<Status>> results(static_cast<size_t>(n));
  std::vector<std::chrono::steady_clock::duration> failed_after(static_cast<size_t>(n));
  // (Each step starts together: rank 1, whose step 2 fails at once, would
  // otherwise wait for the others' step 3 past HORA_TIMEOUT_S.)
  std::barrier steps(n);
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) {
      steps.arrive_and_drop();
      return io.error();
    }
    std::vector<Status>& mine = results[static_cast<size_t>(r)];
    for (int i = 0; i < 6; ++i) {
      const std::vector<float> given(kCount, static_cast<float>(r + 1 + i));
      void* d = io.Upload(given.data(), kCount * 4);
      const TensorView v = OnGpu(d, DataType::kFloat32, {kCount});
      const auto submitted = std::chrono::steady_clock::now();
      Status st = s.AllreduceAsync("step." + std::to_string(i), v, v, {ReduceOp::kSum})
                      .Wait(std::chrono::seconds(12));
      if (i == 2)
        failed_after[static_cast<size_t>(r)] = std::chrono::steady_clock::now() - submitted;
      steps.arrive_and_wait();
      float want = 0;
      for (int q = 0; q < n; ++q) want += static_cast<float>(q + 1 + i);
      if (st.ok()) st = AllAre(io, d, kCount, want, i);
      mine.push_back(st);
    }
    return Status::Ok();
  }));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 11s);
  // Before the abort, a warning at HORA_STALL_WARNING_S.
  EXPECT_NE(log.find("rank 0: allreduce 'step.2': its NCCL work has not ended on the GPU"),
            std::string::npos)
      << log;
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::vector<Status>& st = results[static_cast<size_t>(r)];
    ASSERT_EQ(st.size(), 6u);
    EXPECT_TRUE(st[0].ok()) << st[0].ToString();
    EXPECT_TRUE(st[1].ok()) << st[1].ToString();
    EXPECT_FALSE(st[2].ok());
    if (r == 1) {
      EXPECT_TRUE(Has(st[2], "rank 1 refused its call 3")) << st[2].ToString();
    } else {
      // Not the wait's own timeout (12 s): the watch's abort, at 4 s.
      EXPECT_EQ(st[2].code(), StatusCode::kAborted) << st[2].ToString();
      EXPECT_TRUE(Has(st[2], "its NCCL work had not ended on the GPU")) << st[2].ToString();
      EXPECT_GE(failed_after[static_cast<size_t>(r)], 4s);
    }
    EXPECT_FALSE(st[3].ok());
    EXPECT_TRUE(Has(st[3], "aborted")) << st[3].ToString();
    EXPECT_TRUE(st[4].ok()) << st[4].ToString();
    EXPECT_TRUE(st[5].ok()) << st[5].ToString();
  }
}

// A fused batch larger than the device fusion buffer frees it for a larger
// one, and a free waits for all the device's work, NCCL's included, without
// a bound. GrowBehindStuckNccl runs steps 0 and 1, then steps 2 and 3
// submitted together: rank 1 refuses its NCCL call of step 2, so the
// others' are queued and stuck, and step 3's two tensors (two of 48 KiB)
// need a larger buffer than the first (64 KiB). Then steps 4 and 5, unless
// rank 1 is lost (ThreadRanks::Lose) 1 s after it submitted step 3 (the
// others wait before the grow by then): `loss`. Every rank's statuses,
// step by step.
enum class Loss { kNone, kLost };
std::vector<std::vector<Status>> GrowBehindStuckNccl(int n, Loss loss) {
  const bool lose = loss != Loss::kNone;
  ThreadRanks job(n, [lose](int r) {
    return QueuedRefusingRank(r, lose || r == 1 ? "20" : "4", {{"HORA_DISABLE_GROUP_FUSION", "1"}});
  });
  const std::vector<int64_t> counts{259, 259, 259, 12289, 12289, 259};
  const size_t steps = lose ? 4 : counts.size();
  std::vector<std::vector<Status>> results(static_cast<size_t>(n));
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    std::vector<void*> d;  // (made before any call: two per step)
    for (size_t i = 0; i < steps; ++i) {
      const std::vector<float> given(static_cast<size_t>(counts[i]), static_cast<float>(r + 1));
      for (int t = 0; t < 2; ++t) d.push_back(io.Upload(given.data(), given.size() * 4));
    }
    auto step = [&](size_t i) {
      const std::vector<TensorView> v{OnGpu(d[2 * i], DataType::kFloat32, {counts[i]}),
                                      OnGpu(d[2 * i + 1], DataType::kFloat32, {counts[i]})};
      return s.GroupedAllreduceAsync("step." + std::to_string(i), v, v, {ReduceOp::kSum});
    };
    auto wait = [&](size_t i, std::vector<Handle> h) {
      Status st;
      for (Handle& one : h) {
        const Status got = one.Wait(25s);
        if (st.ok()) st = got;
      }
      const float want = static_cast<float>(n * (n + 1) / 2);
      for (int t = 0; t < 2 && st.ok(); ++t) st = AllAre(io, d[2 * i + t], counts[i], want, i);
      results[static_cast<size_t>(r)].push_back(st);
    };
    for (size_t i = 0; i < 2; ++i) wait(i, step(i));
    std::vector<Handle> stuck = step(2);
    std::vector<Handle> larger = step(3);
    if (lose && r == 1) {
      // (Not after its step 2 fails: that handle completes with its cycle,
      // which step 3's wait for the others holds.)
      std::this_thread::sleep_for(1s);
      job.Lose(1);
    }
    wait(2, std::move(stuck));
    wait(3, std::move(larger));
    for (size_t i = 4; i < steps; ++i) wait(i, step(i));
    return Status::Ok();
  }));
  return results;
}

// Where NCCL's work is stuck, the wait before the grow is bounded by
// HORA_TIMEOUT_S (4 s on the ranks other than 1): past it, the
// communicator is aborted, the stuck batch fails, and so does the larger
// one, naming the wait, on every rank. (The engine's watch does not run
// meanwhile: the wait is in its cycle.) Rank 1 has 20 s, so that it waits
// for the others' verdict on the larger batch without timing out.
TEST_P(NcclFaults, ABufferThatGrowsWaitsForStuckNcclWorkOnlyUntilTheTimeout) {
  const int n = GetParam();
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::vector<Status>> results = GrowBehindStuckNccl(n, Loss::kNone);
  // (Without the bound, the free waits for the host NCCL's backstop: a
  // minute here, tried.)
  EXPECT_LT(std::chrono::steady_clock::now() - start, 12s) << "a rank waited past the timeout";
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::vector<Status>& st = results[static_cast<size_t>(r)];
    ASSERT_EQ(st.size(), 6u);
    EXPECT_FALSE(st[3].ok());
    // (Rank 1's own communicator was aborted: its verdict on step 3 says
    // so first.)
    const std::string wait = "waiting for NCCL's work before a larger buffer";
    EXPECT_TRUE(Has(st[3], ExpectStep2Refused(st, r, wait) ? wait : "aborted")) << st[3].ToString();
    for (size_t i = 4; i < st.size(); ++i) EXPECT_TRUE(st[i].ok()) << st[i].ToString();
  }
}

// The same wait, with HORA_TIMEOUT_S at 20 s, and rank 1 lost 1 s into it:
// the wait asks whether a peer was lost (DeviceStaging::AwaitDevice), and
// the stuck work is aborted at once, naming rank 1; the larger batch fails
// too, naming rank 1.
TEST_P(NcclFaults, AWaitBehindStuckNcclWorkEndsAtOnceWhenAPeerIsLost) {
  const int n = GetParam();
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::vector<Status>> results = GrowBehindStuckNccl(n, Loss::kLost);
  // (Without the check, the others wait the 20 s.)
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "a rank waited toward the timeout";
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::vector<Status>& st = results[static_cast<size_t>(r)];
    ASSERT_EQ(st.size(), 4u);
    if (!ExpectStep2Refused(st, r,
                            "(found while waiting for the device): its NCCL work cannot end, a "
                            "rank of the job being lost: Unavailable: rank 1 was lost"))
      continue;
    // (Naming rank 1: lost, or, where its part of the verdict came
    // before, unable to take part.)
    EXPECT_FALSE(st[3].ok());
    EXPECT_TRUE(Has(st[3], "rank 1")) << st[3].ToString();
  }
}

// The device windows' waits for the device sit behind NCCL's work on the
// stream too. HORA_GPU_BACKEND=auto sends batches of 1000 bytes or more to
// NCCL and the rest to the windows: step 0 (64 bytes) opens the windows,
// steps 1 to 3 (1036 bytes) go to NCCL, where rank 1 refuses step 3's call,
// and step 4 (64 bytes), submitted with it, goes to the windows, where the
// others' wait for their device is queued behind their stuck step 3. Rank 1
// is lost 1 s later. The window's wait asks whether a peer was lost, as the
// staging path's do (DeviceWindow::AwaitWith), and aborts the stuck work, so
// that the wait ends well before its bound (half of HORA_TIMEOUT_S: 10 s).
TEST_P(NcclFaults, AWindowWaitBehindStuckNcclWorkEndsAtOnceWhenAPeerIsLost) {
  const int n = GetParam();
  ThreadRanks job(n, [](int r) {
    return QueuedRefusingRank(r, "20",
                              {{"HORA_GPU_BACKEND", "auto"},
                               {"HORA_NCCL_MIN_BYTES", "1000"},
                               {"HORA_GPU_IPC", "1"},
                               {"HORA_GPU_WINDOW_BYTES", "40000"},
                               // (by cost, small batches would be staged)
                               {"HORA_GPU_ROUTE", "window:0-1000"},
                               // (so that steps 3 and 4 are not fused)
                               {"HORA_FUSION_THRESHOLD_BYTES", "1050"}});
  });
  const std::vector<int64_t> counts{16, kStepCount, kStepCount, kStepCount, 16};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::vector<Status>> results(static_cast<size_t>(n));
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    std::vector<void*> d;
    for (int64_t c : counts) {
      const std::vector<float> given(static_cast<size_t>(c), static_cast<float>(r + 1));
      d.push_back(io.Upload(given.data(), given.size() * 4));
    }
    auto step = [&](size_t i) {
      const TensorView v = OnGpu(d[i], DataType::kFloat32, {counts[i]});
      return s.AllreduceAsync("step." + std::to_string(i), v, v, {ReduceOp::kSum});
    };
    auto wait = [&](size_t i, Handle h) {
      Status st = h.Wait(25s);
      if (st.ok()) st = AllAre(io, d[i], counts[i], static_cast<float>(n * (n + 1) / 2), i);
      results[static_cast<size_t>(r)].push_back(st);
    };
    for (size_t i = 0; i < 3; ++i) wait(i, step(i));
    Handle stuck = step(3);
    Handle behind = step(4);
    if (r == 1) {
      std::this_thread::sleep_for(1s);
      job.Lose(1);
    }
    wait(3, std::move(stuck));
    wait(4, std::move(behind));
    return Status::Ok();
  }));
  // (Without the check, the others' window wait takes its 10 s.)
  EXPECT_LT(std::chrono::steady_clock::now() - start, 8s) << "a rank waited toward its bound";
  EXPECT_GT(job.session(0).engine_counters().window_batches, 0u) << "no batch ran on the windows";
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::vector<Status>& st = results[static_cast<size_t>(r)];
    ASSERT_EQ(st.size(), 5u);
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(st[i].ok()) << st[i].ToString();
    EXPECT_FALSE(st[3].ok());
    if (r == 1) {
      EXPECT_TRUE(Has(st[3], "rank 1 refused its call 3")) << st[3].ToString();
      continue;
    }
    EXPECT_TRUE(Has(st[3],
                    "(found while waiting for the device): its NCCL work cannot end, a "
                    "rank of the job being lost: Unavailable: rank 1 was lost"))
        << st[3].ToString();
    // (Rank 1 had done its part on the windows before it was lost: the sum
    // is whole, or, where the step came after, it fails naming rank 1.)
    EXPECT_TRUE(st[4].ok() || Has(st[4], "rank 1")) << st[4].ToString();
  }
}

// The ranks whose NCCL calls are queued, waiting for rank 1's, which
// failed, after which rank 1 leaves (its Session ends, as shutdown() or the
// end of its process does): their engines stop, as every rank's does when
// one leaves, but their queued NCCL work is still watched (warned of every
// second, saying that no batch follows), and at HORA_TIMEOUT_S (4 s) it is
// aborted, failing that batch, so that nothing
// (the framework's stream neither) waits for it for good.
TEST_P(NcclFaults, QueuedWorkIsWatchedAfterARankWhoseCallFailedLeaves) {
  const int n = GetParam();
  ThreadRanks job(n, [](int r) {
    return QueuedRefusingRank(r, "4", {{"HORA_STALL_WARNING_S", "1"}});
  });
  ::testing::internal::CaptureStderr();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::vector<Status>> results(static_cast<size_t>(n));
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    std::vector<Status>& mine = results[static_cast<size_t>(r)];
    {
      DeviceIo io(s);
      if (!io.ok()) return io.error();
      std::vector<void*> d;
      for (int i = 0; i < 4; ++i) d.push_back(StepTensor(io, r));
      for (int i = 0; i < 3; ++i)
        mine.push_back(SumStep(s, io, d[static_cast<size_t>(i)], i, n, 12s));
      if (r != 1) {
        // The engine has stopped (rank 1 left): a new collective fails.
        const TensorView v = StepView(d[3]);
        mine.push_back(s.AllreduceAsync("after", v, v, {ReduceOp::kSum}).Wait(5s));
      }
    }
    if (r == 1) job.Close(1);
    return Status::Ok();
  }));
  const std::string log = ::testing::internal::GetCapturedStderr();
  // Its warnings say that no batch follows.
  EXPECT_NE(log.find("until the timeout (the engine has stopped: no NCCL batch follows)"),
            std::string::npos)
      << log;
  // (Without the watch, the others' step 2 waits the whole 12 s.)
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "a rank waited past the timeout";
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::vector<Status>& st = results[static_cast<size_t>(r)];
    ASSERT_EQ(st.size(), r == 1 ? 3u : 4u);
    if (!ExpectStep2Refused(st, r, "its NCCL work had not ended on the GPU")) continue;
    EXPECT_FALSE(st[3].ok());
    EXPECT_TRUE(Has(st[3], "the engine stopped")) << st[3].ToString();
    EXPECT_TRUE(Has(st[3], "rank 1")) << st[3].ToString();
  }
}

// A rank lost while the others' NCCL calls are queued, waiting for its
// (which failed): no NCCL batch follows, and the others' engines may be
// idle, but the watch of NCCL's work asks the transport whether a peer was
// lost, and aborts the communicator at once, naming it, well before
// HORA_TIMEOUT_S (20 s). (LoopbackHub::Lose: every rank's transport then
// says rank 1 was lost, as TCP's and shared memory's do when a process
// ends.) The next collective fails naming rank 1 too.
TEST_P(NcclFaults, QueuedWorkIsAbortedAtOnceWhenAPeerIsLost) {
  const int n = GetParam();
  ThreadRanks job(n, [](int r) { return QueuedRefusingRank(r, "20"); });
  std::vector<std::vector<Status>> results(static_cast<size_t>(n));
  std::vector<std::chrono::steady_clock::duration> failed_after(static_cast<size_t>(n));
  std::barrier queued(n);
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    std::vector<Status>& mine = results[static_cast<size_t>(r)];
    DeviceIo io(s);
    if (!io.ok()) {
      queued.arrive_and_drop();
      return io.error();
    }
    std::vector<void*> d;
    for (int i = 0; i < 4; ++i) d.push_back(StepTensor(io, r));
    for (int i = 0; i < 2; ++i)
      mine.push_back(SumStep(s, io, d[static_cast<size_t>(i)], i, n, 15s));
    Handle h = s.AllreduceAsync("step.2", StepView(d[2]), StepView(d[2]), {ReduceOp::kSum});
    // Rank 1's call fails; the others' are queued (their handles finish
    // once they are), and then rank 1 is lost.
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while (!h.Finished() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    queued.arrive_and_wait();
    const auto lost_at = std::chrono::steady_clock::now();
    if (r == 1) job.Lose(1);
    mine.push_back(h.Wait(15s));
    failed_after[static_cast<size_t>(r)] = std::chrono::steady_clock::now() - lost_at;
    if (r != 1) {
      mine.push_back(
          s.AllreduceAsync("after", StepView(d[3]), StepView(d[3]), {ReduceOp::kSum}).Wait(15s));
    }
    return Status::Ok();
  }));
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::vector<Status>& st = results[static_cast<size_t>(r)];
    ASSERT_EQ(st.size(), r == 1 ? 3u : 4u);
    // (Aborted by the watch, or by the idle engine's negotiation, whichever
    // learns of the loss first: both name rank 1.)
    if (!ExpectStep2Refused(st, r, "rank 1 was lost")) continue;
    EXPECT_LT(failed_after[static_cast<size_t>(r)], 5s) << "waited toward HORA_TIMEOUT_S";
    EXPECT_FALSE(st[3].ok());
    EXPECT_TRUE(Has(st[3], "rank 1 was lost")) << st[3].ToString();
  }
}

// hora.torch's way with GPU tensors (wait(stream=...)): each handle hands
// its event to the framework's stream and is dropped at once. Rank 1
// refuses its step 2 call, so the others' step 2 is queued and stuck, its
// handle gone. Their step 3, small enough to be staged through host memory
// (HORA_GPU_BACKEND=auto sends 1000 bytes or more to NCCL), waits behind it
// for its copy in, fails at HORA_TIMEOUT_S (4 s), and lets its pinned
// buffer go, as a failed copy does. The watch still has step 2, and aborts
// it: the framework's stream then goes on. (When the watch kept a batch
// only while its handles or the last batch's did, nothing watched step 2
// after step 3, and that stream waited for the host NCCL's backstop:
// tried.)
TEST_P(NcclFaults, WorkWhoseHandleWasDroppedIsStillWatched) {
  const int n = GetParam();
  ThreadRanks job(n, [](int r) {
    return QueuedRefusingRank(r, r == 1 ? "20" : "4",
                              {{"HORA_GPU_BACKEND", "auto"}, {"HORA_NCCL_MIN_BYTES", "1000"}});
  });
  std::vector<std::vector<Status>> results(static_cast<size_t>(n));
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    std::vector<Status>& mine = results[static_cast<size_t>(r)];
    std::vector<void*> d;
    for (int i = 0; i < 3; ++i) d.push_back(StepTensor(io, r));
    const std::vector<float> few(16, static_cast<float>(r + 1));
    const TensorView small = OnGpu(io.Upload(few.data(), few.size() * 4), DataType::kFloat32, {16});
    for (int i = 0; i < 2; ++i)
      mine.push_back(SumStep(s, io, d[static_cast<size_t>(i)], i, n, 12s));
    gpu::Device& dev = io.device();
    HORA_ASSIGN_OR_RETURN(const gpu::Stream framework, dev.CreateStream());
    HORA_ASSIGN_OR_RETURN(const gpu::Event later, dev.CreateEvent());
    // (The handle goes once it handed its event to the framework's stream.)
    mine.push_back(s.AllreduceAsync("step.2", StepView(d[2]), StepView(d[2]), {ReduceOp::kSum})
                       .StreamWait(framework.id, 12s));
    mine.push_back(s.AllreduceAsync("step.3", small, small, {ReduceOp::kSum}).Wait(12s));
    // The framework's later work on its stream: it runs once step 2 ended,
    // which the watch's abort did by the time step 3 failed. (The host
    // NCCL's own backstop, ten times its calls' timeout of 2 s, would end
    // it 20 s after it was queued.)
    Status st = dev.Record(later, framework);
    if (st.ok()) st = dev.Wait(later, Clock::now() + 2s);
    mine.push_back(st);
    (void)dev.DestroyEvent(later);
    (void)dev.DestroyStream(framework);
    return Status::Ok();
  }));
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::vector<Status>& st = results[static_cast<size_t>(r)];
    ASSERT_EQ(st.size(), 5u);
    EXPECT_TRUE(st[0].ok()) << st[0].ToString();
    EXPECT_TRUE(st[1].ok()) << st[1].ToString();
    if (r == 1) {
      EXPECT_TRUE(Has(st[2], "rank 1 refused its call 3")) << st[2].ToString();
      continue;
    }
    EXPECT_TRUE(st[2].ok()) << st[2].ToString();  // (handed over)
    EXPECT_FALSE(st[3].ok()) << "step 3 did not wait behind step 2";
    EXPECT_TRUE(st[4].ok()) << "the framework's stream still waits for step 2: "
                            << st[4].ToString();
  }
}

// Across hosts, NCCL reports a peer's failure to the other ranks too
// (ncclRemoteError, from ncclCommGetAsyncError), while their kernels wait
// on: HORA_NCCL_LIBRARY=host:queued:net. Rank 1 refuses its step 2 call and
// aborts its communicator; the others' step 2 is queued and stuck. Their
// watch asks NCCL for such an error at each look and aborts at once, well
// before HORA_TIMEOUT_S (20 s), naming it. Step 3 then fails on every rank
// (the communicators were aborted), and step 4 runs on new ones. (Without
// the question, the others waited the test's 12 s: tried.)
TEST_P(NcclFaults, AnErrorNcclReportsAbortsTheQueuedWorkAtOnce) {
  const int n = GetParam();
  ThreadRanks job(n, [](int r) {
    return QueuedRefusingRank(
        r, "20", r == 1 ? Settings{} : Settings{{"HORA_NCCL_LIBRARY", "host:queued:net"}});
  });
  std::vector<std::vector<Status>> results(static_cast<size_t>(n));
  std::vector<std::chrono::steady_clock::duration> took(static_cast<size_t>(n));
  std::barrier steps(n);
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) {
      steps.arrive_and_drop();
      return io.error();
    }
    std::vector<Status>& mine = results[static_cast<size_t>(r)];
    for (int i = 0; i < 5; ++i) {
      void* d = StepTensor(io, r);
      const auto submitted = std::chrono::steady_clock::now();
      mine.push_back(SumStep(s, io, d, i, n, 12s));
      if (i == 2) took[static_cast<size_t>(r)] = std::chrono::steady_clock::now() - submitted;
      steps.arrive_and_wait();
    }
    return Status::Ok();
  }));
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::vector<Status>& st = results[static_cast<size_t>(r)];
    ASSERT_EQ(st.size(), 5u);
    if (ExpectStep2Refused(st, r, "its NCCL work cannot end, NCCL having reported an error")) {
      EXPECT_TRUE(Has(st[2], "ncclRemoteError")) << st[2].ToString();
      EXPECT_LT(took[static_cast<size_t>(r)], 5s) << "waited toward HORA_TIMEOUT_S";
    }
    EXPECT_FALSE(st[3].ok());
    EXPECT_TRUE(Has(st[3], "aborted")) << st[3].ToString();
    EXPECT_TRUE(st[4].ok()) << st[4].ToString();
  }
}

// A copy that faults on rank 1's GPU after it was queued, before its NCCL
// call, as on a GPU (HORA_NCCL_LIBRARY=host:queued): the call is queued,
// and skipped on the faulted device, and the others' kernels wait for it.
// Rank 1's watch finds the batch ended in its GPU's failure and aborts its
// communicator; across hosts NCCL tells the others at once (":net" on
// their host NCCL), and their batch fails well before HORA_TIMEOUT_S
// (20 s), naming NCCL's remote error. (Without that abort, rank 1's batch was
// dropped from its watch as ended, and the others waited the test's 12 s:
// tried.)
TEST_P(NcclFaults, AGpuThatFaultsUnderQueuedNcclWorkAbortsItsCommunicator) {
  const int n = GetParam();
  ThreadRanks job(n, [](int r) {
    return TestSettings({{"HORA_DEVICE", "host"},
                         {"HORA_GPU_BACKEND", "nccl"},
                         {"HORA_NCCL_LIBRARY", r == 1 ? "host:queued" : "host:queued:net"},
                         {"HORA_GPU_IPC", "0"},
                         {"HORA_TIMEOUT_S", "20"}});
  });
  std::vector<std::vector<Status>> results(static_cast<size_t>(n));
  std::vector<std::chrono::steady_clock::duration> took(static_cast<size_t>(n));
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    auto* device = dynamic_cast<gpu::HostDevice*>(&io.device());
    if (device == nullptr) return InternalError("not the host device");
    std::vector<Status>& mine = results[static_cast<size_t>(r)];
    void* d = StepTensor(io, r);
    mine.push_back(SumStep(s, io, d, 0, n, 12s));
    // Out of place: the batch's first work on the GPU is a copy within it.
    void* in = StepTensor(io, r);
    void* out = io.Upload(nullptr, kStepCount * 4);
    if (r == 1) device->FaultNextDeviceCopy();
    const auto submitted = std::chrono::steady_clock::now();
    mine.push_back(
        s.AllreduceAsync("step.1", StepView(in), StepView(out), {ReduceOp::kSum}).Wait(12s));
    took[static_cast<size_t>(r)] = std::chrono::steady_clock::now() - submitted;
    return Status::Ok();
  }));
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::vector<Status>& st = results[static_cast<size_t>(r)];
    ASSERT_EQ(st.size(), 2u);
    EXPECT_TRUE(st[0].ok()) << st[0].ToString();
    EXPECT_FALSE(st[1].ok());
    if (r == 1) {
      EXPECT_TRUE(Has(st[1], "faulted on the device")) << st[1].ToString();
      continue;
    }
    // (Rank 1's end, or, at 3 ranks, another's that learned of it first.)
    EXPECT_TRUE(Has(st[1], "NCCL having reported an error")) << st[1].ToString();
    EXPECT_TRUE(Has(st[1], "(ncclRemoteError): rank ")) << st[1].ToString();
    EXPECT_LT(took[static_cast<size_t>(r)], 5s) << "waited toward HORA_TIMEOUT_S";
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, NcclFaults, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "np" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace hora::testing
