// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A one-rank engine runs a lone GPU allreduce or broadcast at submission
// (engine_at_submission.cc): no cycle, the same results, beside cycles that run
// other work. The GPU is the host device.
#include <gtest/gtest.h>

#include <cstring>
#include <string_view>
#include <thread>

#include "api/session_impl.h"
#include "support/device_io.h"
#include "support/thread_ranks.h"

namespace hora::testing {
namespace {

constexpr auto kForever = std::chrono::nanoseconds::max();

Settings OneRankOnTheHostDevice() {
  return TestSettings({{"HORA_DEVICE", "host"}, {"HORA_GPU_IPC", "0"}});
}

std::vector<float> Floats(const std::vector<uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

TEST(OneRankEngine, AGpuAllreduceRunsAtSubmission) {
  ThreadRanks job(1, OneRankOnTheHostDevice());
  ExpectAllOk(job.Run([&](int, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    // Odd count; average with pre- and post-scaling: x * 0.5 / 1 * 3.
    constexpr size_t kCount = 1001;
    std::vector<float> host(kCount);
    for (size_t i = 0; i < kCount; ++i) host[i] = static_cast<float>(i) - 300.0f;
    void* in = io.Upload(host.data(), kCount * 4);
    void* out = io.Upload(std::vector<float>(kCount, -1.0f).data(), kCount * 4);
    const TensorView vin = OnGpu(in, DataType::kFloat32, {kCount});
    const TensorView vout = OnGpu(out, DataType::kFloat32, {kCount});
    (void)s.AllreduceAsync("warm", vin, vout).Wait(kForever);  // (the device opened)
    const Session::EngineCounters before = s.engine_counters();
    // The engine's part is done when the call returns (the GPU's may not
    // be). (A call that meets a cycle of the engine's own thread, an idle
    // look, is queued: of 20, some must run at once.)
    int at_once = 0;
    for (int i = 0; i < 20; ++i) {
      Handle h = s.AllreduceAsync("scaled", vin, vout, {ReduceOp::kAverage, 0.5, 3.0});
      at_once += h.Finished() ? 1 : 0;
      HORA_RETURN_IF_ERROR(h.Wait(kForever));
    }
    if (at_once == 0) return InternalError("no one-rank allreduce ran at submission");
    const Session::EngineCounters after = s.engine_counters();
    if (after.one_rank_batches != before.one_rank_batches + 20 ||
        after.tensors != before.tensors + 20) {
      return InternalError("the counters missed allreduces run at submission");
    }
    const std::vector<float> got = Floats(io.Download(out, kCount * 4));
    for (size_t i = 0; i < kCount; ++i) {
      const float want = host[i] * 0.5f * 3.0f;
      if (got[i] != want) {
        return InternalError("element " + std::to_string(i) + ": " + std::to_string(got[i]) +
                             ", not " + std::to_string(want));
      }
    }
    // A broadcast too, in place; and an empty tensor.
    Handle b = s.BroadcastAsync("b", vin, 0);
    if (!b.Finished()) return InternalError("the one-rank broadcast was queued for a cycle");
    HORA_RETURN_IF_ERROR(b.Wait(kForever));
    const TensorView empty = OnGpu(in, DataType::kFloat32, {0});
    HORA_RETURN_IF_ERROR(s.AllreduceAsync("empty", empty, empty).Wait(kForever));
    if (Floats(io.Download(in, kCount * 4)) != host) {
      return InternalError("the broadcast changed its tensor");
    }
    return Status::Ok();
  }));
}

TEST(OneRankEngine, RunsAtSubmissionBesideCycles) {
  // Two threads of one rank: one submits host-tensor allreduces (which go
  // through cycles), the other GPU allreduces, some run at submission and
  // some in cycles (a GPU tensor submitted while a cycle is under way or
  // something is queued is queued too). Every result is right; under TSan
  // the two ways share the engine's state without a race.
  ThreadRanks job(1, OneRankOnTheHostDevice());
  ExpectAllOk(job.Run([&](int, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    constexpr size_t kCount = 257;
    void* a = io.Upload(std::vector<float>(kCount, 1.0f).data(), kCount * 4);
    void* b = io.Upload(std::vector<float>(kCount, 0.0f).data(), kCount * 4);
    const TensorView va = OnGpu(a, DataType::kFloat32, {kCount});
    const TensorView vb = OnGpu(b, DataType::kFloat32, {kCount});
    Status host_side;
    std::jthread host([&] {
      std::vector<float> x(kCount, 2.0f), y(kCount);
      for (int i = 0; i < 300 && host_side.ok(); ++i) {
        const TensorView in = TensorView::Flat(x.data(), DataType::kFloat32, kCount);
        const TensorView out = TensorView::Flat(y.data(), DataType::kFloat32, kCount);
        host_side = s.AllreduceAsync("host", in, out, {ReduceOp::kMax}).Wait(kForever);
        if (host_side.ok() && y != x) host_side = InternalError("a host allreduce went wrong");
      }
    });
    int ran_now = 0;  // lone ones whose handle was done when the call returned
    for (int i = 0; i < 300; ++i) {
      // b = a * f, then a = b: a goes 1, 2, 1, 2, ... The first is queued
      // for a cycle at times (a lone one, when a host allreduce's cycle is
      // under way; a group's member always), and runs at submission at
      // others.
      const Reduction times_f{ReduceOp::kSum, i % 2 == 0 ? 2.0 : 0.5, 1.0};
      std::vector<Handle> first;
      if (i % 4 < 2) {
        first.push_back(s.AllreduceAsync("scale", va, vb, times_f));
        ran_now += first.back().Finished() ? 1 : 0;
      } else {
        first = s.GroupedAllreduceAsync("scale", {&va, 1}, {&vb, 1}, times_f);
      }
      HORA_RETURN_IF_ERROR(first.front().Wait(kForever));
      HORA_RETURN_IF_ERROR(s.AllreduceAsync("copy", vb, va).Wait(kForever));
      const float want = i % 2 == 0 ? 2.0f : 1.0f;
      for (void* p : {a, b}) {
        for (float x : Floats(io.Download(p, kCount * 4))) {
          if (x != want) {
            return InternalError("step " + std::to_string(i) + ": a GPU allreduce went wrong (" +
                                 std::to_string(x) + ", not " + std::to_string(want) + ")");
          }
        }
      }
    }
    host.join();
    HORA_RETURN_IF_ERROR(host_side);  // (a failure above: joined on the way out)
    if (ran_now == 0) return InternalError("no lone GPU allreduce ran at submission");
    return Status::Ok();
  }));
}

TEST(OneRankEngine, AloneMeansNoNcclUnlessAskedFor) {
  // One rank has nobody to reduce with: under HORA_GPU_BACKEND=auto even a
  // batch NCCL would take (256 KiB or more) is made on the GPU alone, at
  // submission. Asked for by name (nccl), NCCL takes it, in a cycle (its
  // first batch sets NCCL up: not the submitting thread's work).
  constexpr size_t kCount = size_t{1} << 17;  // 512 KiB of float32
  for (const char* backend : {"auto", "nccl"}) {
    SCOPED_TRACE(backend);
    ThreadRanks job(1, TestSettings({{"HORA_DEVICE", "host"},
                                     {"HORA_GPU_IPC", "0"},
                                     {"HORA_GPU_BACKEND", backend},
                                     {"HORA_NCCL_LIBRARY", "host"}}));
    ExpectAllOk(job.Run([&](int, Session& s) -> Status {
      DeviceIo io(s);
      if (!io.ok()) return io.error();
      const std::vector<float> host(kCount, 3.0f);
      void* in = io.Upload(host.data(), kCount * 4);
      void* out = io.Upload(std::vector<float>(kCount, 0.0f).data(), kCount * 4);
      const TensorView vin = OnGpu(in, DataType::kFloat32, {kCount});
      const TensorView vout = OnGpu(out, DataType::kFloat32, {kCount});
      const Session::EngineCounters before = s.engine_counters();
      HORA_RETURN_IF_ERROR(s.AllreduceAsync("big", vin, vout).Wait(kForever));
      const Session::EngineCounters after = s.engine_counters();
      const bool nccl = std::string_view(backend) == "nccl";
      const uint64_t by_nccl = after.nccl_batches - before.nccl_batches;
      const uint64_t alone = after.one_rank_batches - before.one_rank_batches;
      const uint64_t cycles = after.cycles - before.cycles;
      // (Under nccl the batch ran in a cycle; under auto an idle look of the
      // engine's thread may run a cycle too, so cycles say nothing there.)
      if (nccl ? (by_nccl != 1 || alone != 0 || cycles == 0) : (by_nccl != 0 || alone != 1)) {
        return InternalError(std::to_string(by_nccl) + " by NCCL, " + std::to_string(alone) +
                             " alone, " + std::to_string(cycles) + " cycles");
      }
      if (Floats(io.Download(out, kCount * 4)) != host) return InternalError("wrong result");
      return Status::Ok();
    }));
  }
}

TEST(OneRankEngine, ADeviceThatFailsAtSubmissionFailsTheHandle) {
  // Memory freed after the pointer cache saw it: the device refuses the
  // copy, and the handle says so, naming the collective and the rank; the
  // next collective runs as usual. (The cache asks the device again at the
  // first lookup of each millisecond's round: where "freed" comes in a new
  // round, as on a loaded machine, the submission's check refuses it
  // first, also naming the collective and the rank; then try again.)
  ThreadRanks job(1, OneRankOnTheHostDevice());
  ExpectAllOk(job.Run([&](int, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    constexpr size_t kCount = 64;
    const std::vector<float> host(kCount, 2.0f);
    auto dev = s.impl().devices.Get(0);
    HORA_RETURN_IF_ERROR(dev.status());
    void* out = io.Upload(host.data(), kCount * 4);
    const TensorView vout = OnGpu(out, DataType::kFloat32, {kCount});
    bool device_refused = false;
    for (int attempt = 0; attempt < 50 && !device_refused; ++attempt) {
      HORA_ASSIGN_OR_RETURN(void* doomed, (*dev)->Allocate(kCount * 4));
      const TensorView vd = OnGpu(doomed, DataType::kFloat32, {kCount});
      HORA_RETURN_IF_ERROR(s.AllreduceAsync("seen", vd, vout).Wait(kForever));  // (cached)
      HORA_RETURN_IF_ERROR((*dev)->Free(doomed));
      const Status st = s.AllreduceAsync("freed", vd, vout).Wait(kForever);
      if (st.ok()) return InternalError("a copy from freed memory succeeded");
      const std::string& m = st.message();
      if (m.find("allreduce 'freed'") != std::string::npos &&
          m.find("rank 0 on host device 0 (cuda:0)") != std::string::npos) {
        device_refused = true;
      } else if (m.find("rank 0: allreduce 'freed'") == std::string::npos ||
                 m.find("its memory is host memory") == std::string::npos) {
        return InternalError("the error names neither the collective nor the rank: " +
                             st.ToString());
      }
    }
    if (!device_refused) {
      return InternalError(
          "in 50 tries the submission's check saw the freed memory first each time");
    }
    void* in = io.Upload(host.data(), kCount * 4);
    const TensorView vin = OnGpu(in, DataType::kFloat32, {kCount});
    HORA_RETURN_IF_ERROR(s.AllreduceAsync("after", vin, vout).Wait(kForever));
    if (Floats(io.Download(out, kCount * 4)) != host) return InternalError("wrong result after");
    return Status::Ok();
  }));
}

}  // namespace
}  // namespace hora::testing
