// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// DeviceWindow and the allreduce on it, ranks as threads over the loopback
// transport, on the host device:
//  - ranks of one device use each other's window pointers; ranks of separate
//    devices map each other's windows by handle (the branch processes take,
//    tested between processes by mp_device_shm_*);
//  - the allreduce (fused parts, sizes 0 to many chunks, every path of one
//    and two steps, prescale and average) gives every rank the reference's
//    values (exact for sums of small integers);
//  - a rank not willing, or asking for another size, leaves every rank
//    without a window, saying why, and the Comm usable.
#include "collectives/device_window.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/allreduce_device_window.h"
#include "doubles/host_device.h"
#include "gpu/blocking_copy.h"
#include "transport/loopback/loopback_transport.h"

namespace hora {
namespace {

constexpr Duration kTimeout = std::chrono::seconds(30);
constexpr size_t kWindowBytes = 40000;  // halves of 19968 bytes: 4992 floats

struct Rank {
  std::shared_ptr<gpu::Device> device;
  gpu::Stream stream;
};

// Runs fn(rank, comm, device, stream) on `n` thread ranks; `shared`: all on
// one host device (else one each). Returns each rank's status.
std::vector<Status> OnRanks(
    int n, bool shared,
    const std::function<Status(int, Comm&, std::shared_ptr<gpu::Device>, gpu::Stream)>& fn) {
  auto hub = LoopbackHub::Create(n);
  std::vector<Rank> ranks(static_cast<size_t>(n));
  std::shared_ptr<gpu::Device> one;
  for (Rank& r : ranks) {
    if (!shared || !one) {
      auto d = gpu::HostDevice::Create(0, size_t{1} << 30);
      EXPECT_TRUE(d.ok()) << d.status().ToString();
      one = std::shared_ptr<gpu::Device>(std::move(*d));
    }
    r.device = one;
    auto s = r.device->CreateStream();
    EXPECT_TRUE(s.ok());
    r.stream = *s;
  }
  std::vector<Status> st(static_cast<size_t>(n));
  std::vector<std::unique_ptr<Transport>> transports;
  for (int r = 0; r < n; ++r) transports.push_back(hub->Connect(r));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Comm comm(*transports[static_cast<size_t>(r)], WaitPolicy{kTimeout, {}, nullptr}, 256 << 10,
                1);
      const Rank& me = ranks[static_cast<size_t>(r)];
      st[static_cast<size_t>(r)] = fn(r, comm, me.device, me.stream);
    });
  }
  for (std::thread& t : threads) t.join();
  for (Rank& r : ranks) (void)r.device->DestroyStream(r.stream);
  return st;
}

// Rank r's value of element i of part p: small integers, so that float
// sums are exact whatever the order, and the reference is plain.
float Value(int r, size_t p, size_t i) {
  return static_cast<float>((r * 7 + static_cast<int>(p) * 3 + static_cast<int>(i % 11)) % 13);
}

// The allreduce of `counts` (one part each) on the window: every part
// checked against sum_r(Value) * pre / (n if average) * post.
Status AllreduceAndCheck(int r, Comm& comm, DeviceWindow& w, const std::vector<size_t>& counts,
                         const Reduction& red) {
  gpu::Device& dev = w.device();
  std::vector<AllreducePart> parts;
  std::vector<void*> mem;
  for (size_t p = 0; p < counts.size(); ++p) {
    std::vector<float> host(counts[p]);
    for (size_t i = 0; i < counts[p]; ++i) host[i] = Value(r, p, i);
    HORA_ASSIGN_OR_RETURN(void* d, dev.Allocate(counts[p] * 4));
    HORA_RETURN_IF_ERROR(gpu::CopyHostToDevice(dev, d, host.data(), counts[p] * 4, kTimeout));
    mem.push_back(d);
    parts.push_back({d, d, counts[p]});
  }
  HORA_RETURN_IF_ERROR(AllreduceDeviceWindow(comm, w, parts, DataType::kFloat32, red));
  HORA_RETURN_IF_ERROR(w.WaitDevice("the copies out"));
  const int n = comm.size();
  for (size_t p = 0; p < counts.size(); ++p) {
    std::vector<float> got(counts[p]);
    HORA_RETURN_IF_ERROR(gpu::CopyDeviceToHost(dev, got.data(), mem[p], counts[p] * 4, kTimeout));
    HORA_RETURN_IF_ERROR(dev.Free(mem[p]));
    for (size_t i = 0; i < counts[p]; ++i) {
      float want = 0;
      for (int k = 0; k < n; ++k) want += Value(k, p, i) * static_cast<float>(red.prescale_factor);
      if (red.op == ReduceOp::kAverage) want /= static_cast<float>(n);
      want *= static_cast<float>(red.postscale_factor);
      if (std::abs(got[i] - want) > 1e-6f * std::abs(want)) {  // (average: one rounding)
        return InternalError("rank " + std::to_string(r) + " part " + std::to_string(p) + " (" +
                             std::to_string(counts[p]) + " elements) element " + std::to_string(i) +
                             ": " + std::to_string(got[i]) + ", want " + std::to_string(want));
      }
    }
  }
  return Status::Ok();
}

// Sizes: none, one element, one-step chunks (16 KiB or less), two-step
// chunks, many chunks; fused parts that chunks cut across.
const std::vector<std::vector<size_t>> kBatches = {
    {0}, {1}, {1031}, {4000}, {4992}, {4993}, {30011}, {3, 0, 1500, 2800, 7, 9000, 1}};

void AllreduceOnEveryRank(int n, bool shared) {
  auto st = OnRanks(n, shared, [&](int r, Comm& comm, auto device, gpu::Stream stream) -> Status {
    std::string why;
    HORA_ASSIGN_OR_RETURN(
        std::unique_ptr<DeviceWindow> w,
        DeviceWindow::Open(comm, device, stream, kWindowBytes, kTimeout, true, {}, &why));
    if (!w) return InternalError("no window: " + why);
    // One device: every rank's view of a window is its owner's pointer;
    // separate devices: mapped at addresses of each rank's own.
    for (int k = 0; k < n; ++k) {
      HORA_ASSIGN_OR_RETURN(const gpu::PointerInfo info, device->QueryPointer(w->region(k, 1)));
      if (info.kind != gpu::MemoryKind::kDevice) {
        return InternalError("rank " + std::to_string(k) + "'s window is not device memory here");
      }
    }
    for (const auto& counts : kBatches) {
      for (const Reduction& red :
           {Reduction{ReduceOp::kSum, 1.0, 1.0}, Reduction{ReduceOp::kAverage, 2.0, 0.5}}) {
        HORA_RETURN_IF_ERROR(AllreduceAndCheck(r, comm, *w, counts, red));
      }
    }
    return w->Close(comm);
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].ToString();
  }
}

TEST(DeviceWindow, RanksOfOneDeviceUseEachOthersPointers) {
  for (int n : {2, 3, 4}) AllreduceOnEveryRank(n, true);
}

TEST(DeviceWindow, RanksOfSeparateDevicesMapEachOthersWindows) {
  for (int n : {2, 3}) AllreduceOnEveryRank(n, false);
}

// The pointer branch gives every rank the owner's own address; the mapped
// branch, addresses of each rank's device (none equal to the owner's).
TEST(DeviceWindow, PointersAreSharedOnlyWithinOneDevice) {
  for (bool shared : {true, false}) {
    std::vector<uintptr_t> seen(4);  // rank r's view of rank 0's window
    auto st = OnRanks(3, shared, [&](int r, Comm& comm, auto device, gpu::Stream s) -> Status {
      std::string why;
      HORA_ASSIGN_OR_RETURN(
          auto w, DeviceWindow::Open(comm, device, s, kWindowBytes, kTimeout, true, {}, &why));
      if (!w) return InternalError("no window: " + why);
      seen[static_cast<size_t>(r)] = reinterpret_cast<uintptr_t>(w->region(0, 0));
      return w->Close(comm);
    });
    for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.ToString();
    for (int r = 1; r < 3; ++r) {
      EXPECT_EQ(seen[static_cast<size_t>(r)] == seen[0], shared)
          << (shared ? "one device" : "separate devices") << ", rank " << r;
    }
  }
}

// A rank with HORA_GPU_IPC=0, or another window size: no rank gets a
// window, each says why, and the Comm goes on working.
TEST(DeviceWindow, ARankThatDeclinesOrDiffersLeavesEveryRankWithout) {
  for (const char* how : {"declines", "differs"}) {
    std::vector<std::string> why(3);
    auto st = OnRanks(3, false, [&](int r, Comm& comm, auto device, gpu::Stream s) -> Status {
      const bool declines = std::string(how) == "declines";
      const size_t bytes = !declines && r == 1 ? 2 * kWindowBytes : kWindowBytes;
      HORA_ASSIGN_OR_RETURN(
          auto w, DeviceWindow::Open(comm, device, s, bytes, kTimeout, !declines || r != 1, {},
                                     &why[static_cast<size_t>(r)]));
      if (w) return InternalError("a window although rank 1 " + std::string(how));
      return BarrierShared(comm);
    });
    for (int r = 0; r < 3; ++r) {
      EXPECT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].ToString();
      const std::string& w = why[static_cast<size_t>(r)];
      if (std::string(how) == "declines") {
        EXPECT_NE(w.find("rank 1 did not set up a GPU window"), std::string::npos) << w;
        if (r == 1) {
          EXPECT_NE(w.find("HORA_GPU_IPC=0"), std::string::npos) << w;
        }
      } else {
        EXPECT_NE(w.find("GPU windows of different sizes (HORA_GPU_WINDOW_BYTES)"),
                  std::string::npos)
            << w;
        EXPECT_NE(w.find("rank 1: GPU window setup or teardown (80000 bytes)"), std::string::npos)
            << w;
      }
    }
  }
}

}  // namespace
}  // namespace hora
