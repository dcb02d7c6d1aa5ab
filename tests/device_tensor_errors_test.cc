// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// GPU tensors that go wrong, on the host device (or a GPU, with
// HORATEST_DEVICE=cuda): ranks that stage or route them differently, NCCL
// asked for where it cannot be used, tensors refused at submission (host
// memory called GPU memory, a view past its allocation, a second GPU, a
// host output), and a build or machine with no GPU. Each error names what
// it is about, and the job goes on.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "api/session_impl.h"
#include "doubles/host_device.h"
#include "hora/build_info.h"
#include "support/device_io.h"
#include "support/device_settings.h"
#include "support/thread_ranks.h"

namespace hora::testing {
namespace {

// The routes a batch may take, by name, with the batches each took (rank
// 0's engine), leaving out the routes that took none.
std::map<std::string, uint64_t> RoutesTaken(const Session& s) {
  std::map<std::string, uint64_t> taken;
  for (const auto& [route, n] : s.engine_counters().gpu_route_batches) {
    if (n > 0) taken[route] = n;
  }
  return taken;
}

using Taken = std::map<std::string, uint64_t>;

// HORA_GPU_BACKEND=auto sends batches of HORA_NCCL_MIN_BYTES or more to
// NCCL; smaller ones go by cost: staged in chunks (an allreduce of 400
// bytes, where the window's fixed cost is higher) or whole (an allgather).
TEST(DeviceTensorErrors, AutoSendsLargeBatchesToNcclAndSmallOnesByCost) {
  if (std::getenv("HORATEST_DEVICE") != nullptr) GTEST_SKIP() << "the host device's NCCL";
  Settings settings = DeviceSettings("window");
  settings["HORA_GPU_ROUTE"] = "";
  settings["HORA_GPU_BACKEND"] = "auto";
  settings["HORA_NCCL_MIN_BYTES"] = "8K";
  constexpr int kRanks = 3;
  ThreadRanks job(kRanks, settings);
  for (size_t count : {size_t{100}, size_t{10000}}) {
    ExpectAllOk(job.Run([&](int r, Session& s) {
      return AllreduceRankValues(s, r, count, std::to_string(count) + " floats");
    }));
  }
  // Allgather, by its whole output (the same on every rank though each
  // rank's input differs): 3 x 600 bytes stays on Hora's paths, 3 x 6000
  // goes through NCCL.
  for (size_t count : {size_t{150}, size_t{1500}}) {
    ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
      DeviceIo io(s);
      if (!io.ok()) return io.error();
      const size_t mine = count + static_cast<size_t>(r) - 1;  // (uneven)
      std::vector<float> host(mine, static_cast<float>(r));
      void* d = io.Upload(host.data(), mine * 4);
      HORA_ASSIGN_OR_RETURN(
          Tensor all, s.Allgather(OnGpu(d, DataType::kFloat32, {static_cast<int64_t>(mine)})));
      std::vector<float> want;
      for (int q = 0; q < kRanks; ++q)
        want.insert(want.end(), count + q - 1, static_cast<float>(q));
      const auto got = io.Download(all.data(), all.num_bytes());
      if (got.size() != want.size() * 4 || std::memcmp(got.data(), want.data(), got.size()) != 0) {
        return InternalError("allgather of " + std::to_string(count) + " floats differs");
      }
      return Status::Ok();
    }));
  }
  EXPECT_EQ(RoutesTaken(job.session(0)), (Taken{{"nccl", 2}, {"staged", 1}, {"staged_chunks", 1}}));
  const Session::EngineCounters c = job.session(0).engine_counters();
  EXPECT_EQ(c.window_batches, 0u);
  EXPECT_EQ(c.nccl_batches, 2u);
}

// With no route named, an allreduce goes by cost: staged in chunks when
// small (400 bytes), on the device windows when large (400 KB; the costs
// cross at about 170 KiB: device_routes.cc). HORA_GPU_ROUTE names the
// route a batch tries first by its size: the window for small ones too,
// or staged whole; NCCL named for small batches takes them whatever
// HORA_NCCL_MIN_BYTES (and NCCL takes the large ones by it); a route that
// cannot take a batch (no window where HORA_GPU_IPC=0) leaves it to the
// cost. The sums are right each way.
TEST(DeviceTensorErrors, TheRouteNamedForABatchsSizeTakesItFirstElseTheCheapest) {
  struct Case {
    const char* path;   // DeviceSettings'
    const char* route;  // HORA_GPU_ROUTE
    const char* backend;
    Taken taken;  // batches of the two sizes (100 and 100,000 floats) each route took
  };
  const bool host_nccl = std::getenv("HORATEST_DEVICE") == nullptr;
  for (const Case& c : {Case{"window", "", "hora", {{"staged_chunks", 1}, {"window", 1}}},
                        Case{"window", "window:0-1K", "hora", {{"window", 2}}},
                        Case{"window", "staged:0-1K", "hora", {{"staged", 1}, {"window", 1}}},
                        Case{"window", "staged_chunks", "hora", {{"staged_chunks", 2}}},
                        Case{"window", "nccl:0-1K", "auto", {{"nccl", 2}}},
                        Case{"chunked", "window", "hora", {{"staged_chunks", 2}}}}) {
    if (!host_nccl && std::string_view(c.backend) == "auto") continue;  // (the host's NCCL)
    Settings settings = DeviceSettings(c.path);
    settings["HORA_GPU_ROUTE"] = c.route;
    settings["HORA_GPU_BACKEND"] = c.backend;
    ThreadRanks job(3, settings);
    for (size_t count : {size_t{100}, size_t{100000}}) {
      ExpectAllOk(job.Run([&](int r, Session& s) {
        return AllreduceRankValues(s, r, count,
                                   std::string(c.route) + ", " + std::to_string(count) + " floats");
      }));
    }
    EXPECT_EQ(RoutesTaken(job.session(0)), c.taken) << "HORA_GPU_ROUTE='" << c.route << "'";
  }
}

// A route HORA_GPU_ROUTE names must be one: the Session is not made, and
// the error names the value and the routes there are.
TEST(DeviceTensorErrors, AnUnknownRouteIsRefusedWhenTheSessionIsMade) {
  SessionOptions options;
  options.rank = 0;
  options.world = ThreadWorld::Create(1);
  options.read_environment = false;
  options.settings = DeviceSettings("window");
  options.settings["HORA_GPU_ROUTE"] = "window:0-1K,fast:1K-";
  const auto made = Session::Create(options);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(made.status().message().find("HORA_GPU_ROUTE='window:0-1K,fast:1K-' is invalid: "
                                         "unknown route 'fast'"),
            std::string::npos)
      << made.status().message();
  EXPECT_NE(made.status().message().find("one_rank, nccl, window, staged_chunks, staged"),
            std::string::npos)
      << made.status().message();
}

// HORA_GPU_BACKEND=nccl where NCCL cannot be used (the host device, with no
// stand-in library): every rank's allreduce fails naming why, and the job
// goes on.
TEST(DeviceTensorErrors, NcclAskedForButUnusableFailsEveryRankNamingWhy) {
  if (std::getenv("HORATEST_DEVICE") != nullptr) GTEST_SKIP() << "the host device";
  Settings settings = DeviceSettings("nccl");
  settings["HORA_NCCL_LIBRARY"] = "";
  ThreadRanks job(2, settings);
  auto st = job.Run([&](int, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    std::vector<float> host(8, 1.0f);
    const TensorView v = OnGpu(io.Upload(host.data(), 32), DataType::kFloat32, {8});
    const Status failed = s.Allreduce(v, v);
    if (failed.ok()) return InternalError("an allreduce through NCCL that cannot be");
    if (failed.message().find("HORA_GPU_BACKEND=nccl, but NCCL cannot be used") ==
            std::string::npos ||
        failed.message().find("rank 0: the host device has no NCCL") == std::string::npos) {
      return InternalError("got: " + failed.ToString());
    }
    return s.Barrier();
  });
  ExpectAllOk(st);
}

// Bad GPU tensors are refused where they are submitted, naming them.
TEST(DeviceTensorErrors, BadTensorsAreRefusedAtSubmission) {
  ThreadRanks job(1, DeviceSettings());
  Session& s = job.session(0);
  DeviceIo io(s);
  ASSERT_TRUE(io.ok());
  std::vector<float> host(16, 1.0f);
  // Host memory called GPU memory.
  Status st = s.Allreduce(OnGpu(host.data(), DataType::kFloat32, {16}),
                          OnGpu(host.data(), DataType::kFloat32, {16}));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("its memory is host memory, not memory of cuda:0"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("float32[16] on cuda:0"), std::string::npos) << st.message();
  // A view past the end of its allocation.
  void* d = io.Upload(host.data(), 64);
  st = s.Broadcast(OnGpu(d, DataType::kFloat32, {17}), 0);
  EXPECT_NE(st.message().find("run past the end"), std::string::npos) << st.ToString();
  // A second GPU.
  st = s.Allreduce(TensorView(d, DataType::kFloat32, {16}, {DeviceType::kCUDA, 1}),
                   TensorView(d, DataType::kFloat32, {16}, {DeviceType::kCUDA, 1}));
  EXPECT_NE(st.message().find("tensor on cuda:1, but this rank works on cuda:0"), std::string::npos)
      << st.ToString();
  // Output on the host, input on the GPU.
  st = s.Allreduce(OnGpu(d, DataType::kFloat32, {16}),
                   TensorView::Flat(host.data(), DataType::kFloat32, 16));
  EXPECT_NE(st.message().find("is not on the device of input"), std::string::npos) << st.ToString();
  // The blocking forms into a given output: the output overlaps the input,
  // is on the host for a GPU input, or on the GPU for a host input.
  st = s.Allgather(OnGpu(d, DataType::kFloat32, {16}), OnGpu(d, DataType::kFloat32, {16}));
  EXPECT_NE(st.message().find("rank 0: allgather: output float32[16] on cuda:0 overlaps input"),
            std::string::npos)
      << st.ToString();
  st = s.Allgather(OnGpu(d, DataType::kFloat32, {16}),
                   TensorView::Flat(host.data(), DataType::kFloat32, 16));
  EXPECT_NE(st.message().find("output float32[16] on cpu is not on the GPU of input float32[16] "
                              "on cuda:0"),
            std::string::npos)
      << st.ToString();
  st = s.Allgather(TensorView::Flat(host.data(), DataType::kFloat32, 16),
                   OnGpu(d, DataType::kFloat32, {16}));
  EXPECT_NE(st.message().find("output float32[16] on cuda:0 is not in host memory"),
            std::string::npos)
      << st.ToString();
  // The session still works on a good tensor.
  st = s.Allreduce(OnGpu(d, DataType::kFloat32, {16}), OnGpu(d, DataType::kFloat32, {16}));
  EXPECT_TRUE(st.ok()) << st.ToString();
}

// Memory freed and allocated again, smaller, at the same address: the check
// at submission asks for the allocation's identity (its buffer id) again
// once its round has passed (LazyDevice::kRecheckEvery), and refuses a view
// past the new allocation's end, where the cached range of the old one
// would have let it through.
TEST(DeviceTensorErrors, AViewPastTheEndOfMemoryAllocatedAgainIsRefused) {
  ThreadRanks job(1, DeviceSettings());
  Session& s = job.session(0);
  DeviceIo io(s);
  ASSERT_TRUE(io.ok());
  gpu::Device& dev = io.device();
  if (dynamic_cast<gpu::HostDevice*>(&dev) == nullptr) {
    GTEST_SKIP() << "the host device's reuse of a freed address (CUDA's is not promised)";
  }
  constexpr int64_t kCount = 1 << 18;  // float32: 1 MiB
  void* a = dev.Allocate(kCount * 4).value();
  Status st =
      s.Allreduce(OnGpu(a, DataType::kFloat32, {kCount}), OnGpu(a, DataType::kFloat32, {kCount}));
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(dev.Free(a).ok());
  void* b = dev.Allocate(4096).value();
  if (a != b) (void)dev.Free(b);
  ASSERT_EQ(a, b) << "the host device gives the freed address again";
  std::this_thread::sleep_for(gpu::LazyDevice::kRecheckEvery + std::chrono::milliseconds(5));
  st = s.Allreduce(OnGpu(b, DataType::kFloat32, {kCount}), OnGpu(b, DataType::kFloat32, {kCount}));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("run past the end of its cuda:0 allocation (4096 bytes"),
            std::string::npos)
      << st.ToString();
  // The new allocation's own bytes are taken.
  st = s.Allreduce(OnGpu(b, DataType::kFloat32, {1024}), OnGpu(b, DataType::kFloat32, {1024}));
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(dev.Free(b).ok());
}

// Without HORA_DEVICE=host, a GPU tensor needs a CUDA build on a machine
// with a GPU; here the error says why there is none (or, on a GPU machine,
// that this host memory is not the GPU's).
TEST(DeviceTensorErrors, AutoDeviceSaysWhyThereIsNone) {
  ThreadRanks job(1, TestSettings());
  std::vector<float> host(4, 1.0f);
  const TensorView v = OnGpu(host.data(), DataType::kFloat32, {4});
  const Status st = job.session(0).Allreduce(v, v);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cuda:0"), std::string::npos) << st.ToString();
  if (!CudaBuilt()) {
    EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.ToString();
    EXPECT_NE(st.message().find("HORA_DEVICE=auto"), std::string::npos) << st.ToString();
  }
}

}  // namespace
}  // namespace hora::testing
