// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// hora-gpu-latency: where the time of a one-rank GPU allreduce goes. Each
// line times one way of doing the same work on the rank's GPU stream,
// queued and then waited for by the host (p50 and mean over --iters):
//   sync        an event recorded and waited for: the floor of any call
//   memcpy      a copy within the device (cudaMemcpyAsync), then the event
//   batched     Hora's batched copy with one part, then the event
//   batched2    the same bytes in two parts (the kernel), then the event
//   batched-rt  the one-part kernel launched by the CUDA runtime (<<<>>>),
//               where Hora's device launches it through the driver
//   *-call      the enqueueing call alone (the host's part; its wait untimed)
//   nccl        ncclAllReduce at one rank, then the event (where NCCL loads)
//   hora        Session::AllreduceAsync + Handle::Wait, the tensor named, on
//               Hora's own path (HORA_GPU_BACKEND=hora unless set); a line
//               after each size says where its calls went
//   hora-anon   the same, unnamed (a new name each call, as hora-bench's)
//   hora-submit AllreduceAsync alone (its Wait untimed)
// Run alone (one rank); HORA_DEVICE=cuda on a GPU, host elsewhere.
// Back to back, every call finds the caches warm. Two options make each
// timed call follow, untimed, what hora-bench does before it (and what a
// training step's compute does to the host's caches):
//   --cold BYTES  the host writes BYTES of memory of its own (its caches
//                 then hold none of Hora's or NCCL's data)
//   --upload      the input is copied from pinned host memory to the GPU,
//                 and the host waits for it
//
//   HORA_DEVICE=cuda build/bin/hora-gpu-latency --sizes 4,64M --iters 2000
//   ... --ways hora,nccl   (those ways only)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "api/session_impl.h"
#include "backends/nccl/nccl.h"
#include "common/units.h"
#include "hora/hora.h"
#ifdef HORA_LATENCY_CUDA
#include "gpu/cuda/cuda_kernels.h"
#endif

namespace {

using namespace hora;

constexpr Duration kTimeout = std::chrono::seconds(60);

struct Args {
  std::vector<size_t> sizes = {4, size_t{64} << 20};
  int iters = 1000;
  std::string ways;  // a comma-separated list; empty: all
  size_t cold = 0;   // bytes the host writes before each timed call
  bool upload = false;
  bool Wants(const std::string& way) const {
    return ways.empty() || ("," + ways + ",").find("," + way + ",") != std::string::npos;
  }
};

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--upload") {
      a->upload = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    const std::string v = argv[++i];
    if (k == "--ways") {
      a->ways = v;
    } else if (k == "--iters") {
      a->iters = std::max(1, std::stoi(v));
    } else if (k == "--cold") {
      const std::optional<uint64_t> n = ParseBytes(v);
      if (!n) return false;
      a->cold = *n;
    } else if (k == "--sizes") {
      a->sizes.clear();
      size_t at = 0;
      while (at <= v.size()) {
        const size_t comma = std::min(v.find(',', at), v.size());
        const std::optional<uint64_t> n = ParseBytes(v.substr(at, comma - at));
        if (!n) return false;
        a->sizes.push_back(*n);
        at = comma + 1;
      }
    } else {
      return false;
    }
  }
  return true;
}

double Micros(Duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// What each timed call follows, untimed (--cold, --upload).
using Before = std::function<void()>;

// Times `step` --iters times (after a tenth as warm-up), each after
// `before`: p50 and mean, in us.
void Time(const Args& a, const Before& before, const char* what, size_t bytes,
          const std::function<Status(Duration*)>& step) {
  if (!a.Wants(what)) return;
  const int iters = a.iters;
  std::vector<double> us;
  us.reserve(static_cast<size_t>(iters));
  for (int i = 0; i < iters + iters / 10; ++i) {
    Duration d{};
    before();
    const Status st = step(&d);
    if (!st.ok()) {
      std::printf("%12zu  %-12s failed: %s\n", bytes, what, st.ToString().c_str());
      return;
    }
    if (i >= iters / 10) us.push_back(Micros(d));
  }
  double sum = 0;
  for (double x : us) sum += x;
  std::sort(us.begin(), us.end());
  std::printf("%12zu  %-12s %10.2f %10.2f %10.2f\n", bytes, what, us[us.size() / 2],
              sum / static_cast<double>(us.size()), us[us.size() * 99 / 100]);
}

// Times the whole of `call` (queue, then wait): the step Time takes.
std::function<Status(Duration*)> Whole(std::function<Status()> call) {
  return [call = std::move(call)](Duration* d) {
    const TimePoint t0 = Clock::now();
    const Status st = call();
    *d = Clock::now() - t0;
    return st;
  };
}

int Run(const Args& a) {
  // Hora's own path (a one-rank collective made on the GPU alone), unless
  // the environment names another: NCCL is timed beside it, not under it.
  SessionOptions options;
  if (std::getenv("HORA_GPU_BACKEND") == nullptr) options.settings["HORA_GPU_BACKEND"] = "hora";
  auto created = Session::Create(options);
  if (!created.ok()) {
    std::fprintf(stderr, "hora-gpu-latency: %s\n", created.status().ToString().c_str());
    return 1;
  }
  Session& s = **created;
  Session::Impl& impl = s.impl();
  Result<std::shared_ptr<gpu::Device>> opened = impl.devices.Get(0);
  if (!opened.ok()) {
    std::fprintf(stderr, "hora-gpu-latency: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  gpu::Device& dev = **opened;
  const gpu::Stream stream = impl.devices.stream();
  Result<gpu::Event> event = dev.CreateEvent();
  if (!event.ok()) return 1;
  const gpu::Event e = *event;
  auto wait = [&]() -> Status {
    HORA_RETURN_IF_ERROR(dev.Record(e, stream));
    return dev.Wait(e, DeadlineAfter(Clock::now(), kTimeout));
  };
  std::unique_ptr<NcclLibrary> nccl;
  std::unique_ptr<NcclComm> comm;
  if (auto lib = OpenNcclLibrary(impl.config.nccl_library); lib.ok()) {
    nccl = std::move(*lib);
    if (auto id = nccl->UniqueId(); id.ok()) {
      if (auto c = nccl->InitRank(*id, 1, 0, dev, kTimeout); c.ok()) comm = std::move(*c);
    }
  }
  std::printf(
      "# hora-gpu-latency on %s, %d iterations; NCCL: %s; before each: %zu bytes "
      "written by the host%s\n",
      dev.info().name.c_str(), a.iters, comm ? nccl->version().c_str() : "none", a.cold,
      a.upload ? ", the input uploaded" : "");
  std::printf("# %10s  %-12s %10s %10s %10s\n", "bytes", "way", "p50(us)", "mean(us)", "p99(us)");
  const Device where{DeviceType::kCUDA, dev.info().ordinal};
  std::vector<unsigned char> cold(a.cold);
  unsigned char fill = 0;
  for (const size_t bytes : a.sizes) {
    const size_t count = std::max<size_t>(bytes / 4, 1);
    Result<void*> in = dev.Allocate(count * 4);
    Result<void*> out = dev.Allocate(count * 4);
    if (!in.ok() || !out.ok()) return 1;
    (void)dev.Memset(*in, 0, count * 4, stream);
    (void)wait();
    Result<void*> pinned = a.upload ? dev.AllocatePinned(count * 4) : Result<void*>(nullptr);
    if (!pinned.ok()) return 1;
    const Before prepare = [&] {
      if (a.cold > 0) {
        ++fill;  // (a new value each time: every line is written)
        std::memset(cold.data(), fill, cold.size());
      }
      if (a.upload) {
        (void)dev.Copy(*in, *pinned, count * 4, gpu::CopyKind::kHostToDevice, stream);
        (void)wait();
      }
    };
    const TensorView tin(*in, DataType::kFloat32, {static_cast<int64_t>(count)}, where);
    const TensorView tout(*out, DataType::kFloat32, {static_cast<int64_t>(count)}, where);
    Time(a, prepare, "sync", bytes, Whole([&] { return wait(); }));
    Time(a, prepare, "memcpy", bytes, Whole([&] {
           HORA_RETURN_IF_ERROR(
               dev.Copy(*out, *in, count * 4, gpu::CopyKind::kDeviceToDevice, stream));
           return wait();
         }));
    const gpu::CopyPart part{*out, *in, count * 4};
    Time(a, prepare, "batched", bytes, Whole([&] {
           HORA_RETURN_IF_ERROR(dev.BatchedCopy({&part, 1}, stream));
           return wait();
         }));
    const gpu::CopyPart halves[2] = {{*out, *in, count * 2},
                                     {static_cast<char*>(*out) + count * 2,
                                      static_cast<const char*>(*in) + count * 2, count * 2}};
    Time(a, prepare, "batched2", bytes, Whole([&] {
           HORA_RETURN_IF_ERROR(dev.BatchedCopy({halves, 2}, stream));
           return wait();
         }));
#ifdef HORA_LATENCY_CUDA
    const bool on_cuda = dev.info().name.rfind("host device", 0) != 0;
    const auto runtime_launch = [&] {
      return cudaSuccess == gpu::cuda::LaunchBatchedCopy(&part, 1, dev.info().multiprocessors,
                                                         reinterpret_cast<cudaStream_t>(stream.id))
                 ? Status::Ok()
                 : InternalError("the runtime's launch failed");
    };
    if (on_cuda) {
      Time(a, prepare, "batched-rt", bytes, Whole([&] {
             HORA_RETURN_IF_ERROR(runtime_launch());
             return wait();
           }));
    }
#endif
    // The enqueueing calls alone (what the host spends; the waits untimed).
    auto call_only = [&](const std::function<Status()>& call) {
      return [&, call](Duration* d) {
        const TimePoint t0 = Clock::now();
        const Status st = call();
        *d = Clock::now() - t0;
        HORA_RETURN_IF_ERROR(st);
        return wait();
      };
    };
    Time(a, prepare, "memcpy-call", bytes, call_only([&] {
           return dev.Copy(*out, *in, count * 4, gpu::CopyKind::kDeviceToDevice, stream);
         }));
    Time(a, prepare, "batched-call", bytes, call_only([&] {
           return dev.BatchedCopy({&part, 1}, stream);
         }));
    Time(a, prepare, "batched2-call", bytes, call_only([&] {
           return dev.BatchedCopy({halves, 2}, stream);
         }));
#ifdef HORA_LATENCY_CUDA
    if (on_cuda) Time(a, prepare, "batched-rt-call", bytes, call_only(runtime_launch));
#endif
    if (comm) {
      Time(a, prepare, "nccl-call", bytes, call_only([&] {
             return comm->AllReduce(*in, *out, count, DataType::kFloat32, ReduceOp::kSum, stream);
           }));
    }
    Time(a, prepare, "record-call", bytes, call_only([&] { return dev.Record(e, stream); }));
    if (comm) {
      Time(a, prepare, "nccl", bytes, Whole([&] {
             HORA_RETURN_IF_ERROR(
                 comm->AllReduce(*in, *out, count, DataType::kFloat32, ReduceOp::kSum, stream));
             return wait();
           }));
    }
    const Session::EngineCounters before = s.engine_counters();
    Time(a, prepare, "hora", bytes,
         Whole([&] { return s.AllreduceAsync("t", tin, tout).Wait(kWaitAsLongAsItTakes); }));
    Time(a, prepare, "hora-anon", bytes,
         Whole([&] { return s.AllreduceAsync("", tin, tout).Wait(kWaitAsLongAsItTakes); }));
    Time(a, prepare, "hora-submit", bytes, [&](Duration* d) {
      const TimePoint t0 = Clock::now();
      Handle h = s.AllreduceAsync("t", tin, tout);
      *d = Clock::now() - t0;
      return h.Wait(kWaitAsLongAsItTakes);
    });
    // Where Hora's calls went (the route is the point of the comparison).
    const Session::EngineCounters after = s.engine_counters();
    std::printf("# %10zu  hora's calls: %llu on the GPU alone, %llu by NCCL, %llu in cycles\n",
                bytes,
                static_cast<unsigned long long>(after.one_rank_batches - before.one_rank_batches),
                static_cast<unsigned long long>(after.nccl_batches - before.nccl_batches),
                static_cast<unsigned long long>(after.cycles - before.cycles));
    if (*pinned != nullptr) (void)dev.FreePinned(*pinned);
    (void)dev.Free(*in);
    (void)dev.Free(*out);
  }
  comm.reset();
  (void)dev.DestroyEvent(e);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kUsage =
      "usage: hora-gpu-latency [--sizes 4,64M] [--iters N] [--ways sync,memcpy,...]\n"
      "                        [--cold BYTES] [--upload]\n"
      "Times one rank's GPU allreduce back to back beside the same copy done by hand and by\n"
      "NCCL (HORA_DEVICE=cuda on a GPU; the host device elsewhere).\n";
  if (argc == 2 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  Args a;
  if (!Parse(argc, argv, &a)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  return Run(a);
}
