// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// GPU tensors through every collective, on the host device (HORA_DEVICE=host:
// device pointers fault if host code touches them, streams are threads; or
// on a GPU, with HORATEST_DEVICE=cuda), at
// world sizes 1-4 as threads: allreduce (every dtype and op, with scale
// factors, sizes 0 to 64 Ki elements, in place and not, fused batches,
// groups, a joined rank), broadcast from every root, allgather,
// reducescatter and alltoall with uneven rows. Each result is read back from
// the device and compared with the independent reference of
// support/reference.h. (The errors: device_tensor_errors_test.cc.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>

#include "api/session_impl.h"
#include "doubles/host_device.h"
#include "gpu/blocking_copy.h"
#include "hora/build_info.h"
#include "support/device_io.h"
#include "support/device_settings.h"
#include "support/reference.h"
#include "support/thread_ranks.h"

namespace hora::testing {
namespace {

bool OnGpuDevice(const Tensor& t) { return t.device() == Device{DeviceType::kCUDA, 0}; }

// World sizes 1-4, each on every path.
class DeviceTensors : public ::testing::TestWithParam<std::tuple<int, const char*>> {
 protected:
  int World() const { return std::get<0>(GetParam()); }
  bool OnWindow() const { return std::string_view(std::get<1>(GetParam())) == "window"; }
  bool ByNccl() const { return std::string_view(std::get<1>(GetParam())) == "nccl"; }
  void SetUp() override {
    const char* device = std::getenv("HORATEST_DEVICE");
    if (ByNccl() && World() > 1 && device != nullptr && std::string_view(device) != "host") {
      GTEST_SKIP() << "NCCL needs a GPU per rank; these ranks share one";
    }
  }
  Settings Staged() const { return DeviceSettings(std::get<1>(GetParam())); }
  // That the allreduces ran on the path of the parameter (rank 0's engine).
  void ExpectThePath(ThreadRanks& job) const {
    const Session::EngineCounters c = job.session(0).engine_counters();
    if (OnWindow() && World() > 1) {
      EXPECT_GT(c.window_batches, 0u) << "no allreduce ran on the device window";
    } else if (!ByNccl()) {  // (with NCCL, those it does not take run there)
      EXPECT_EQ(c.window_batches, 0u) << "allreduces ran on the device window";
    }
    if (ByNccl()) {
      EXPECT_GT(c.nccl_batches, 0u) << "no allreduce ran through NCCL";
    } else {
      EXPECT_EQ(c.nccl_batches, 0u) << "allreduces ran through NCCL";
    }
  }
};

std::vector<Reduction> ReductionsFor(DataType dtype) {
  std::vector<Reduction> out;
  for (ReduceOp op : kAllReduceOps) {
    if (dtype == DataType::kBool && op == ReduceOp::kAverage) continue;
    out.push_back({op, 1.0, 1.0});
  }
  if (dtype != DataType::kBool) {
    out.push_back({ReduceOp::kSum, 0.5, 3.0});
    out.push_back({ReduceOp::kAverage, 0.5, 3.0});
  }
  return out;
}

TEST_P(DeviceTensors, AllreduceEveryDtypeAndOp) {
  const int n = World();
  ThreadRanks job(n, Staged());
  uint64_t seed = 7;
  for (DataType dtype : kAllDataTypes) {
    const size_t esize = DataTypeSize(dtype);
    for (const Reduction& red : ReductionsFor(dtype)) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{1031}, size_t{65537}}) {
        if (count == 65537 && red.op != ReduceOp::kSum) continue;  // (the large size: once)
        ++seed;
        for (bool in_place : {true, false}) {
          std::vector<std::vector<uint8_t>> got(static_cast<size_t>(n));
          auto st = job.Run([&](int r, Session& s) {
            DeviceIo io(s);
            if (!io.ok()) return io.error();
            std::vector<uint8_t> host(count * esize);
            FillInput(dtype, red.op, host.data(), count, seed, r);
            void* in = io.Upload(host.data(), host.size());
            void* out = in_place ? in : io.Upload(nullptr, host.size());
            const auto shape = std::vector<int64_t>{static_cast<int64_t>(count)};
            HORA_RETURN_IF_ERROR(
                s.Allreduce(OnGpu(in, dtype, shape), OnGpu(out, dtype, shape), red));
            got[static_cast<size_t>(r)] = io.Download(out, host.size());
            return Status::Ok();
          });
          for (int r = 0; r < n; ++r) {
            ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].ToString();
            const std::string diff = CompareFilledAllreduce(
                n, dtype, red, seed, got[static_cast<size_t>(r)].data(), count);
            ASSERT_TRUE(diff.empty())
                << DataTypeName(dtype) << " " << ReduceOpName(red.op) << " pre "
                << red.prescale_factor << " count " << count << (in_place ? " in place" : "")
                << " rank " << r << ": " << diff;
          }
        }
      }
    }
  }
  ExpectThePath(job);
  // One rank's allreduce is made on its GPU, not staged through the host.
  const uint64_t alone = job.session(0).engine_counters().one_rank_batches;
  if (n == 1 && !ByNccl()) {
    EXPECT_GT(alone, 0u) << "no one-rank allreduce ran on the GPU alone";
  } else if (n > 1) {
    EXPECT_EQ(alone, 0u);
  }
}

// Adasum (not element-wise) on GPU tensors gives, bit for bit, what it gives
// on the same values in host memory: a fused batch of three tensors (Adasum
// runs them one at a time) and a single one.
TEST_P(DeviceTensors, AdasumMatchesTheHostPathBitForBit) {
  const int n = World();
  if ((n & (n - 1)) != 0) GTEST_SKIP() << "Adasum needs a power-of-two number of ranks";
  ThreadRanks job(n, Staged());
  const std::vector<size_t> counts = {1, 1031, 4096};
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16}) {
    const size_t esize = DataTypeSize(dtype);
    auto input = [&](int r, size_t i) {
      std::vector<uint8_t> v(counts[i] * esize);
      FillInput(dtype, ReduceOp::kSum, v.data(), counts[i], 40 + i, r);
      return v;
    };
    std::vector<std::vector<std::vector<uint8_t>>> host(static_cast<size_t>(n)),
        gpu(static_cast<size_t>(n));
    auto st = job.Run([&](int r, Session& s) {
      DeviceIo io(s);
      if (!io.ok()) return io.error();
      auto& h = host[static_cast<size_t>(r)];
      std::vector<void*> d;
      std::vector<Handle> hs;
      for (size_t i = 0; i < counts.size(); ++i) {
        h.push_back(input(r, i));
        d.push_back(io.Upload(h.back().data(), h.back().size()));
      }
      for (size_t i = 0; i < counts.size(); ++i) {
        const TensorView hv(h[i].data(), dtype, {static_cast<int64_t>(counts[i])});
        hs.push_back(s.AllreduceAsync("host." + std::to_string(i), hv, hv, {ReduceOp::kAdasum}));
      }
      for (size_t i = 0; i < counts.size(); ++i) {
        const TensorView gv = OnGpu(d[i], dtype, {static_cast<int64_t>(counts[i])});
        hs.push_back(s.AllreduceAsync("gpu." + std::to_string(i), gv, gv, {ReduceOp::kAdasum}));
      }
      for (Handle& x : hs) HORA_RETURN_IF_ERROR(x.Wait(kForever));
      for (size_t i = 0; i < counts.size(); ++i)
        gpu[static_cast<size_t>(r)].push_back(io.Download(d[i], counts[i] * esize));
      return Status::Ok();
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].ToString();
      for (size_t i = 0; i < counts.size(); ++i) {
        EXPECT_TRUE(host[static_cast<size_t>(r)][i] == gpu[static_cast<size_t>(r)][i])
            << DataTypeName(dtype) << " tensor " << i << " rank " << r;
        if (n > 1 && counts[i] > 1) {  // (of one rank, or one element alike, it is the input)
          EXPECT_FALSE(host[static_cast<size_t>(r)][i] == input(r, i))
              << "adasum changed nothing: " << DataTypeName(dtype) << " tensor " << i;
        }
      }
    }
  }
}

// Many tensors at once, of two dtypes and sizes 0 to 5000, named and as a
// group: the engine fuses them (one batched copy in, one out).
TEST_P(DeviceTensors, FusedAndGroupedAllreduce) {
  const int n = World();
  ThreadRanks job(n, Staged());
  constexpr int kTensors = 24;
  auto dtype_of = [](int i) { return i % 3 == 0 ? DataType::kFloat64 : DataType::kInt32; };
  auto count_of = [](int i) { return static_cast<size_t>(i == 5 ? 0 : (i * 211) % 5000 + 1); };
  const Reduction red{ReduceOp::kSum, 1.0, 1.0};
  for (bool grouped : {false, true}) {
    std::vector<std::vector<std::vector<uint8_t>>> got(static_cast<size_t>(n));
    auto st = job.Run([&](int r, Session& s) {
      DeviceIo io(s);
      if (!io.ok()) return io.error();
      std::vector<TensorView> views;
      std::vector<void*> ptrs;
      for (int i = 0; i < kTensors; ++i) {
        const size_t count = count_of(i);
        std::vector<uint8_t> host(count * DataTypeSize(dtype_of(i)));
        FillInput(dtype_of(i), red.op, host.data(), count, 100 + static_cast<uint64_t>(i), r);
        ptrs.push_back(io.Upload(host.data(), host.size()));
        views.push_back(OnGpu(ptrs.back(), dtype_of(i), {static_cast<int64_t>(count)}));
      }
      std::vector<Handle> handles;
      if (grouped) {
        handles = s.GroupedAllreduceAsync("group", views, views, red);
      } else {
        for (int i = 0; i < kTensors; ++i)
          handles.push_back(s.AllreduceAsync("t" + std::to_string(i), views[static_cast<size_t>(i)],
                                             views[static_cast<size_t>(i)], red));
      }
      for (Handle& h : handles) HORA_RETURN_IF_ERROR(h.Wait(kForever));
      for (int i = 0; i < kTensors; ++i) {
        got[static_cast<size_t>(r)].push_back(
            io.Download(ptrs[static_cast<size_t>(i)], views[static_cast<size_t>(i)].num_bytes()));
      }
      return Status::Ok();
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].ToString();
      for (int i = 0; i < kTensors; ++i) {
        const std::string diff = CompareFilledAllreduce(
            n, dtype_of(i), red, 100 + static_cast<uint64_t>(i),
            got[static_cast<size_t>(r)][static_cast<size_t>(i)].data(), count_of(i));
        ASSERT_TRUE(diff.empty()) << (grouped ? "grouped" : "named") << " tensor " << i << " rank "
                                  << r << ": " << diff;
      }
    }
  }
  Session::Impl& impl = job.session(0).impl();
  {
    MutexLock lock(impl.engine_mu);
    const EngineStats stats = impl.sets[0]->engine->stats();
    if (n > 1) {
      EXPECT_GT(stats.fused_batches, 0u) << "nothing was fused";
    }
    // Fused tensors are packed and unpacked on the device by batched copies
    // (one launch each), not copied one by one: the tensors are in place, so
    // no copy within the device was needed. (One rank's in-place sums need
    // no copy at all.)
    DeviceIo io(job.session(0));
    if (auto* host = dynamic_cast<gpu::HostDevice*>(&io.device()); host != nullptr) {
      EXPECT_EQ(host->copies(gpu::CopyKind::kDeviceToDevice), 0u);
      if (n > 1) {
        EXPECT_GE(host->batched_copies(), 2 * stats.fused_batches);
      }
    }
  }
  ExpectThePath(job);
}

// Reducescatter of GPU tensors for every dtype and op (and scaled), as a
// group of two: dimension 0 of 1 (fewer rows than ranks) and of 3n + 1
// (uneven), 3 columns. Outputs on the GPU, each rank's rows checked against
// the reduction computed on the host (ReferenceAllreduce). With NCCL, it
// takes what it reduces as Hora does (NcclTakes), and Hora's path the rest.
TEST_P(DeviceTensors, GroupedReducescatterEveryDtypeAndOp) {
  const int n = World();
  ThreadRanks job(n, Staged());
  constexpr int64_t kCols = 3;
  const std::vector<int64_t> dims{1, 3 * int64_t{n} + 1};
  uint64_t seed = 300;
  for (DataType dtype : kAllDataTypes) {
    const size_t esize = DataTypeSize(dtype);
    for (const Reduction& red : ReductionsFor(dtype)) {
      ++seed;
      // in[t][r]: tensor t of rank r; expected[t]: its full reduction.
      std::vector<std::vector<std::vector<uint8_t>>> in(dims.size());
      std::vector<Expected> expected;
      for (size_t t = 0; t < dims.size(); ++t) {
        const size_t count = static_cast<size_t>(dims[t] * kCols);
        std::vector<const void*> ptrs;
        for (int r = 0; r < n; ++r) {
          in[t].emplace_back(count * esize);
          FillInput(dtype, red.op, in[t].back().data(), count, seed + 1000 * t, r);
          ptrs.push_back(in[t].back().data());
        }
        expected.push_back(ReferenceAllreduce(dtype, red, ptrs, count));
      }
      std::vector<std::vector<std::vector<uint8_t>>> got(static_cast<size_t>(n));
      auto st = job.Run([&](int r, Session& s) -> Status {
        DeviceIo io(s);
        if (!io.ok()) return io.error();
        std::vector<TensorView> views;
        for (size_t t = 0; t < dims.size(); ++t) {
          const std::vector<uint8_t>& mine = in[t][static_cast<size_t>(r)];
          views.push_back(OnGpu(io.Upload(mine.data(), mine.size()), dtype, {dims[t], kCols}));
        }
        std::vector<Handle> h = s.GroupedReducescatterAsync("rs", views, red);
        for (size_t t = 0; t < dims.size(); ++t) {
          HORA_RETURN_IF_ERROR(h[t].Wait(kForever));
          std::optional<Tensor> out = h[t].TakeOutput();
          const int64_t rows = dims[t] / n + (r < dims[t] % n ? 1 : 0);
          if (!out || !OnGpuDevice(*out) || out->shape() != std::vector<int64_t>{rows, kCols}) {
            return InternalError("tensor " + std::to_string(t) + "'s output is " +
                                 (out ? out->view().Describe() : std::string("missing")));
          }
          got[static_cast<size_t>(r)].push_back(io.Download(out->data(), out->num_bytes()));
        }
        return Status::Ok();
      });
      for (size_t t = 0; t < dims.size(); ++t) {
        int64_t first = 0;
        for (int r = 0; r < n; ++r) {
          ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].ToString();
          const int64_t rows = dims[t] / n + (r < dims[t] % n ? 1 : 0);
          const std::string diff =
              Compare(expected[t], got[static_cast<size_t>(r)][t].data(),
                      static_cast<size_t>(first * kCols), static_cast<size_t>(rows * kCols));
          ASSERT_TRUE(diff.empty())
              << DataTypeName(dtype) << " " << ReduceOpName(red.op) << " pre "
              << red.prescale_factor << " dim0 " << dims[t] << " rank " << r << ": " << diff;
          first += rows;
        }
      }
    }
  }
  const Session::EngineCounters c = job.session(0).engine_counters();
  EXPECT_EQ(c.window_batches, 0u);
  if (ByNccl()) {
    EXPECT_GT(c.nccl_batches, 0u) << "NCCL took no reducescatter";
  } else {
    EXPECT_EQ(c.nccl_batches, 0u);
  }
}

// A group of allgathers of GPU tensors, three dtypes (1, 2 and 8 bytes),
// ranks with different row counts (some none): each output on the GPU, the
// ranks' rows in rank order.
TEST_P(DeviceTensors, GroupedAllgatherGivesGpuOutputs) {
  const int n = World();
  ThreadRanks job(n, Staged());
  const std::vector<DataType> dtypes{DataType::kUInt8, DataType::kFloat16, DataType::kInt64};
  constexpr int64_t kCols = 5;
  auto rows_of = [](size_t t, int r) { return static_cast<int64_t>((r + t) % 3); };
  for (uint64_t salt : {1u, 2u}) {
    // gathered[t]: every rank's rows of tensor t, in rank order.
    std::vector<std::vector<uint8_t>> gathered(dtypes.size());
    for (size_t t = 0; t < dtypes.size(); ++t) {
      for (int r = 0; r < n; ++r) {
        const auto part = BytePattern(
            static_cast<size_t>(rows_of(t, r) * kCols) * DataTypeSize(dtypes[t]), r, salt + 10 * t);
        gathered[t].insert(gathered[t].end(), part.begin(), part.end());
      }
    }
    auto st = job.Run([&](int r, Session& s) -> Status {
      DeviceIo io(s);
      if (!io.ok()) return io.error();
      std::vector<TensorView> views;
      for (size_t t = 0; t < dtypes.size(); ++t) {
        const auto mine = BytePattern(
            static_cast<size_t>(rows_of(t, r) * kCols) * DataTypeSize(dtypes[t]), r, salt + 10 * t);
        views.push_back(
            OnGpu(io.Upload(mine.data(), mine.size()), dtypes[t], {rows_of(t, r), kCols}));
      }
      std::vector<Handle> h = s.GroupedAllgatherAsync("ag", views);
      for (size_t t = 0; t < dtypes.size(); ++t) {
        HORA_RETURN_IF_ERROR(h[t].Wait(kForever));
        std::optional<Tensor> out = h[t].TakeOutput();
        if (!out || !OnGpuDevice(*out))
          return InternalError("an allgather output is not on the GPU");
        if (io.Download(out->data(), out->num_bytes()) != gathered[t]) {
          return InternalError("allgather " + std::to_string(t) + " (" + DataTypeName(dtypes[t]) +
                               ") differs, salt " + std::to_string(salt));
        }
      }
      return Status::Ok();
    });
    ExpectAllOk(st);
  }
}

TEST_P(DeviceTensors, BroadcastFromEveryRoot) {
  const int n = World();
  ThreadRanks job(n, Staged());
  for (int root = 0; root < n; ++root) {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{4099}, size_t{1} << 20}) {
      const std::vector<uint8_t> want = BytePattern(bytes, root, bytes);
      std::vector<std::vector<uint8_t>> got(static_cast<size_t>(n));
      auto st = job.Run([&](int r, Session& s) {
        DeviceIo io(s);
        if (!io.ok()) return io.error();
        const std::vector<uint8_t> mine = BytePattern(bytes, r, bytes);
        void* d = io.Upload(mine.data(), bytes);
        HORA_RETURN_IF_ERROR(
            s.Broadcast(OnGpu(d, DataType::kUInt8, {static_cast<int64_t>(bytes)}), root));
        got[static_cast<size_t>(r)] = io.Download(d, bytes);
        return Status::Ok();
      });
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].ToString();
        EXPECT_TRUE(got[static_cast<size_t>(r)] == want)
            << "root " << root << " bytes " << bytes << " rank " << r;
      }
    }
  }
}

// Allgather, reducescatter and alltoall: the output Hora allocates is on the
// tensor's GPU.
TEST_P(DeviceTensors, ShapedCollectivesGiveGpuOutputs) {
  const int n = World();
  ThreadRanks job(n, Staged());
  for (DataType dtype :
       {DataType::kUInt8, DataType::kFloat16, DataType::kFloat32, DataType::kInt64}) {
    const size_t esize = DataTypeSize(dtype);
    for (int64_t base : {0, 1, 5, 7, 1031}) {
      const int64_t cols = 3;
      // (5: every rank's part the same size, as NCCL's own allgather and
      // reducescatter take; the others uneven, in groups)
      auto rows_of = [&](int r) { return base == 0 || base == 5 ? base : base + r % 3; };
      const size_t row_bytes = static_cast<size_t>(cols) * esize;
      // Allgather.
      std::vector<uint8_t> gathered;
      for (int r = 0; r < n; ++r) {
        const auto part = BytePattern(static_cast<size_t>(rows_of(r)) * row_bytes, r,
                                      static_cast<uint64_t>(base));
        gathered.insert(gathered.end(), part.begin(), part.end());
      }
      // Alltoall: rank p sends (p + q + base) % 3 rows to rank q.
      auto a2a_rows = [&](int p, int q) { return base == 0 ? 0 : (p + q + base) % 3; };
      std::vector<std::vector<uint8_t>> a2a_in;
      std::vector<std::vector<int64_t>> a2a_splits;
      MakeAlltoallInputs(n, a2a_rows, row_bytes, static_cast<uint64_t>(base), &a2a_in, &a2a_splits);
      auto st = job.Run([&](int r, Session& s) {
        DeviceIo io(s);
        if (!io.ok()) return io.error();
        const auto mine = BytePattern(static_cast<size_t>(rows_of(r)) * row_bytes, r,
                                      static_cast<uint64_t>(base));
        void* d = io.Upload(mine.data(), mine.size());
        HORA_ASSIGN_OR_RETURN(Tensor all, s.Allgather(OnGpu(d, dtype, {rows_of(r), cols})));
        if (!(all.device() == Device{DeviceType::kCUDA, 0})) {
          return InternalError("allgather's output is on " + DeviceName(all.device()));
        }
        if (io.Download(all.data(), all.num_bytes()) != gathered) {
          return InternalError("allgather differs at base " + std::to_string(base));
        }
        // Reducescatter (sum) of the gathered rows, every rank the same
        // input: each gets n times its share.
        const int64_t total_rows = static_cast<int64_t>(gathered.size() / row_bytes);
        if (dtype == DataType::kFloat32) {
          std::vector<float> ones(static_cast<size_t>(total_rows * cols));
          for (size_t i = 0; i < ones.size(); ++i) ones[i] = static_cast<float>(i % 13);
          void* rs_in = io.Upload(ones.data(), ones.size() * sizeof(float));
          HORA_ASSIGN_OR_RETURN(Tensor part,
                                s.Reducescatter(OnGpu(rs_in, dtype, {total_rows, cols})));
          const int64_t share = total_rows / n + (r < total_rows % n ? 1 : 0);
          if (part.shape() != std::vector<int64_t>{share, cols} || !OnGpuDevice(part)) {
            return InternalError("reducescatter's output is " + part.view().Describe());
          }
          int64_t first = 0;
          for (int q = 0; q < r; ++q) first += total_rows / n + (q < total_rows % n ? 1 : 0);
          const auto bytes = io.Download(part.data(), part.num_bytes());
          for (int64_t i = 0; i < share * cols; ++i) {
            float v;
            std::memcpy(&v, bytes.data() + static_cast<size_t>(i) * sizeof(float), sizeof v);
            const float want = static_cast<float>(n) * ones[static_cast<size_t>(first * cols + i)];
            if (v != want) {
              return InternalError("reducescatter element " + std::to_string(i) + ": " +
                                   std::to_string(v) + ", want " + std::to_string(want));
            }
          }
          // Average, scaled before and after: n * (v / 2) / n * 3.
          HORA_ASSIGN_OR_RETURN(Tensor avg, s.Reducescatter(OnGpu(rs_in, dtype, {total_rows, cols}),
                                                            {ReduceOp::kAverage, 0.5, 3.0}));
          const auto avg_bytes = io.Download(avg.data(), avg.num_bytes());
          for (int64_t i = 0; i < share * cols; ++i) {
            float v;
            std::memcpy(&v, avg_bytes.data() + static_cast<size_t>(i) * sizeof(float), sizeof v);
            const float want = 1.5f * ones[static_cast<size_t>(first * cols + i)];
            if (std::abs(v - want) > 1e-6f * std::abs(want)) {
              return InternalError("scaled average reducescatter element " + std::to_string(i) +
                                   ": " + std::to_string(v) + ", want " + std::to_string(want));
            }
          }
        }
        // Alltoall with uneven splits.
        const auto& in = a2a_in[static_cast<size_t>(r)];
        const auto& splits = a2a_splits[static_cast<size_t>(r)];
        int64_t in_rows = 0;
        for (int64_t v : splits) in_rows += v;
        void* a2a = io.Upload(in.data(), in.size());
        std::vector<int64_t> received;
        HORA_ASSIGN_OR_RETURN(Tensor out,
                              s.Alltoall(OnGpu(a2a, dtype, {in_rows, cols}), splits, &received));
        if (!OnGpuDevice(out)) return InternalError("alltoall's output is on the host");
        if (io.Download(out.data(), out.num_bytes()) !=
            AlltoallExpected(n, a2a_rows, row_bytes, a2a_in, r)) {
          return InternalError("alltoall differs at base " + std::to_string(base));
        }
        for (int q = 0; q < n; ++q) {
          if (received[static_cast<size_t>(q)] != a2a_rows(q, r))
            return InternalError("alltoall's received splits are wrong");
        }
        return Status::Ok();
      });
      for (int r = 0; r < n; ++r) {
        EXPECT_TRUE(st[static_cast<size_t>(r)].ok())
            << DataTypeName(dtype) << " base " << base << ": "
            << st[static_cast<size_t>(r)].ToString();
      }
    }
  }
  // Each base: an allgather and an alltoall of each of 4 dtypes, and two
  // reducescatters of float32.
  const uint64_t nccl = job.session(0).engine_counters().nccl_batches;
  EXPECT_EQ(nccl, ByNccl() ? 5u * (4u * 2u + 2u) : 0u);
}

// A rank that joined (out of data) reduces host placeholders while the others
// stage GPU tensors: they agree on the wire, and the joined rank counts as
// a zero.
TEST_P(DeviceTensors, JoinedRankWhileOthersUseGpuTensors) {
  const int n = World();
  if (n < 2) GTEST_SKIP() << "a join with others still running needs two ranks";
  ThreadRanks job(n, Staged());
  constexpr size_t kCount = 3001;
  std::vector<std::vector<uint8_t>> got(static_cast<size_t>(n));
  auto st = job.Run([&](int r, Session& s) {
    if (r == 0) return s.JoinAsync().Wait(kForever);
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    std::vector<int32_t> host(kCount);
    for (size_t i = 0; i < kCount; ++i) host[i] = static_cast<int32_t>(i) * r;
    void* d = io.Upload(host.data(), kCount * 4);
    for (int step = 0; step < 3; ++step) {
      const TensorView v = OnGpu(d, DataType::kInt32, {static_cast<int64_t>(kCount)});
      HORA_RETURN_IF_ERROR(s.AllreduceAsync("w", v, v, {ReduceOp::kSum}).Wait(kForever));
    }
    got[static_cast<size_t>(r)] = io.Download(d, kCount * 4);
    return s.JoinAsync().Wait(kForever);
  });
  // Step 1 sums i*r over ranks 1..n-1 (the joined rank adds zeros): i*S;
  // steps 2 and 3 sum n-1 equal values: i * S * (n-1)^2.
  int64_t s_sum = 0;
  for (int r = 1; r < n; ++r) s_sum += r;
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].ToString();
    if (r == 0) continue;
    for (size_t i = 0; i < kCount; i += 97) {
      int32_t v;
      std::memcpy(&v, got[static_cast<size_t>(r)].data() + i * 4, 4);
      const auto expect = static_cast<int32_t>(static_cast<int64_t>(i) * s_sum * (n - 1) * (n - 1));
      ASSERT_EQ(v, expect) << "rank " << r << " element " << i;
    }
  }
}

// A joined rank that still has a GPU tensor in flight: its tensor and its
// placeholders for the others' tensors may run fused in one batch (GPU and host
// memory together).
TEST_P(DeviceTensors, AJoinedRanksGpuTensorFusesWithItsPlaceholders) {
  const int n = World();
  if (n < 2) GTEST_SKIP() << "a join with others still running needs two ranks";
  // Cycles 50 ms apart, so that the others' two tensors are decided (and
  // fused) in one.
  Settings settings = Staged();
  settings["HORA_CYCLE_TIME_MS"] = "50";
  ThreadRanks job(n, settings);
  constexpr size_t kCount = 517;
  // Rank 0 has "mine" in flight when it joins; "other" it never submits.
  // Either may come first in the batch: both orders run.
  for (const auto& [mine, other] : {std::pair{"b", "a"}, std::pair{"a", "b"}}) {
    std::vector<std::vector<uint8_t>> got_m(static_cast<size_t>(n)), got_o(static_cast<size_t>(n));
    auto st = job.Run([&](int r, Session& s) {
      DeviceIo io(s);
      if (!io.ok()) return io.error();
      std::vector<int32_t> m(kCount, r + 1), o(kCount, 10 * (r + 1));
      void* dm = io.Upload(m.data(), kCount * 4);
      void* dob = io.Upload(o.data(), kCount * 4);
      const TensorView vm = OnGpu(dm, DataType::kInt32, {static_cast<int64_t>(kCount)});
      const TensorView vo = OnGpu(dob, DataType::kInt32, {static_cast<int64_t>(kCount)});
      if (r == 0) {  // `mine` in flight, then out of data
        Handle hm = s.AllreduceAsync(mine, vm, vm, {ReduceOp::kSum});
        HORA_RETURN_IF_ERROR(s.JoinAsync().Wait(kForever));
        HORA_RETURN_IF_ERROR(hm.Wait(kForever));
        got_m[0] = io.Download(dm, kCount * 4);
        return Status::Ok();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // (rank 0 joins first)
      Handle ho = s.AllreduceAsync(other, vo, vo, {ReduceOp::kSum});
      Handle hm = s.AllreduceAsync(mine, vm, vm, {ReduceOp::kSum});
      HORA_RETURN_IF_ERROR(hm.Wait(kForever));
      HORA_RETURN_IF_ERROR(ho.Wait(kForever));
      got_m[static_cast<size_t>(r)] = io.Download(dm, kCount * 4);
      got_o[static_cast<size_t>(r)] = io.Download(dob, kCount * 4);
      return s.JoinAsync().Wait(kForever);
    });
    const int32_t sum_m = n * (n + 1) / 2;   // every rank's
    const int32_t sum_o = 10 * (sum_m - 1);  // rank 0 (joined) adds 0
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].ToString();
      for (size_t i = 0; i < kCount; i += 101) {
        int32_t v;
        std::memcpy(&v, got_m[static_cast<size_t>(r)].data() + i * 4, 4);
        ASSERT_EQ(v, sum_m) << mine << ", rank " << r;
        if (r == 0) continue;
        std::memcpy(&v, got_o[static_cast<size_t>(r)].data() + i * 4, 4);
        ASSERT_EQ(v, sum_o) << other << ", rank " << r;
      }
    }
  }
}

// A device that fails before the collective (here: memory freed behind
// Hora's back, so the copy in fails) fails that rank's handle, and nobody is
// left waiting; the job goes on, and the next allreduce is whole. Every
// other rank's allreduce fails naming it: results without its data are not
// given.
//  - Staged: the collective still runs with identity values for that rank,
//    and the ranks are told after it (device/batch_verdict.h).
//  - Through NCCL: the ranks say before the call whether they can make it
//    (the input's copy to the output failed), and none makes it.
//  - On the window: the failure goes with the rank's step.
TEST_P(DeviceTensors, ADeviceThatFailsTheCopyInLeavesNobodyWaiting) {
  const int n = World();
  if (n < 2) GTEST_SKIP() << "others waiting needs two ranks";
  // (On a GPU, reading freed memory is undefined: it may read what was
  // there, or fault. The host device unmaps it, so the read fails.)
  if (std::getenv("HORATEST_DEVICE") != nullptr) GTEST_SKIP() << "freed memory that faults";
  ThreadRanks job(n, Staged());
  constexpr size_t kCount = 64;
  // A first allreduce sets up what stays (the window, staging buffers), so
  // that nothing is allocated where the freed tensor was.
  ExpectAllOk(job.Run(
      [&](int r, Session& s) { return AllreduceRankValues(s, r, kCount, "the first allreduce"); }));
  auto st = job.Run([&](int r, Session& s) {
    auto dev = s.impl().devices.Get(0);
    HORA_RETURN_IF_ERROR(dev.status());
    std::vector<float> host(kCount, static_cast<float>(r + 1));
    HORA_ASSIGN_OR_RETURN(void* d, (*dev)->Allocate(kCount * 4));
    HORA_ASSIGN_OR_RETURN(void* o, (*dev)->Allocate(kCount * 4));
    HORA_RETURN_IF_ERROR(
        gpu::CopyHostToDevice(**dev, d, host.data(), kCount * 4, std::chrono::seconds(30)));
    const TensorView v = OnGpu(d, DataType::kFloat32, {static_cast<int64_t>(kCount)});
    const TensorView out = OnGpu(o, DataType::kFloat32, {static_cast<int64_t>(kCount)});
    if (r != 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    // (Out of place: through NCCL too, the input is copied before the call.)
    Handle h = s.AllreduceAsync("freed", v, out, {ReduceOp::kSum});
    if (r == 1) HORA_RETURN_IF_ERROR((*dev)->Free(d));  // before the others come
    Status done = h.Wait(kForever);
    if (r != 1) HORA_RETURN_IF_ERROR((*dev)->Free(d));
    HORA_RETURN_IF_ERROR((*dev)->Free(o));
    return done;
  });
  for (int r = 0; r < n; ++r) {
    const Status& s = st[static_cast<size_t>(r)];
    if (r == 1) {
      EXPECT_FALSE(s.ok()) << "the rank whose memory went reported nothing";
      EXPECT_NE(s.message().find("allreduce 'freed': rank 1 on "), std::string::npos)
          << s.ToString();
      continue;
    }
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
    EXPECT_NE(s.message().find("allreduce 'freed'"), std::string::npos) << s.ToString();
    const std::string named = OnWindow() ? "rank 1 failed on its GPU during this allreduce"
                              : ByNccl() ? "rank 1 could not take part in this allreduce"
                                         : "rank 1 could not give its data to this allreduce";
    EXPECT_NE(s.message().find(named), std::string::npos) << s.ToString();
  }
  ExpectAllOk(job.Run([](int, Session& s) { return s.Barrier(); }));
  // The next allreduce, on the same path, has every rank's data.
  ExpectAllOk(job.Run(
      [&](int r, Session& s) { return AllreduceRankValues(s, r, kCount, "the allreduce after"); }));
  ExpectThePath(job);
}

// A rank whose GPU stops (here: its stream held back 3 s, with
// HORA_TIMEOUT_S=2) while an allreduce is on the device windows: its wait
// for the device ends first (after half the timeout), and its step says its
// device may still be at work. Every rank's allreduce fails naming it, no
// rank is left waiting, and the windows are given up: the next allreduce
// is staged, and whole.
TEST_P(DeviceTensors, AStuckGpuGivesUpTheWindowsOnEveryRank) {
  const int n = World();
  if (n < 2 || !OnWindow()) GTEST_SKIP() << "the device windows at two ranks or more";
  if (std::getenv("HORATEST_DEVICE") != nullptr) GTEST_SKIP() << "a stream held on the host device";
  Settings settings = Staged();
  settings["HORA_TIMEOUT_S"] = "2";
  ThreadRanks job(n, settings);
  constexpr size_t kCount = 64;
  auto allreduce = [&](int r, Session& s) {
    return AllreduceRankValues(s, r, kCount, "the allreduce");
  };
  ExpectAllOk(job.Run(allreduce));  // (the windows are open)
  const uint64_t on_window = job.session(0).engine_counters().window_batches;
  EXPECT_GT(on_window, 0u);
  auto st = job.Run([&](int r, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    auto* host_dev = dynamic_cast<gpu::HostDevice*>(&io.device());
    if (host_dev == nullptr) return Status::Ok();
    std::vector<float> host(kCount, 1.0f);
    void* d = io.Upload(host.data(), kCount * 4);
    if (r == 1) {
      HORA_ASSIGN_OR_RETURN(const uint64_t hora_stream, s.GpuStream());
      HORA_RETURN_IF_ERROR(host_dev->RunOnStream(
          gpu::Stream{hora_stream}, [] { std::this_thread::sleep_for(std::chrono::seconds(3)); }));
    }
    const TensorView v = OnGpu(d, DataType::kFloat32, {static_cast<int64_t>(kCount)});
    return s.Allreduce(v, v);
  });
  for (int r = 0; r < n; ++r) {
    const Status& s = st[static_cast<size_t>(r)];
    EXPECT_FALSE(s.ok()) << "rank " << r << " got a result without rank 1's data";
    if (r != 1) {
      EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
      EXPECT_NE(s.message().find("rank 1 failed on its GPU"), std::string::npos) << s.ToString();
      EXPECT_NE(s.message().find("the GPU windows are given up"), std::string::npos)
          << s.ToString();
    } else {
      EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
    }
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // (the held stream goes on)
  ExpectAllOk(job.Run(allreduce));
  EXPECT_EQ(job.session(0).engine_counters().window_batches, on_window + 1)
      << "an allreduce ran on the windows after they were given up";
}

TEST_P(DeviceTensors, RanksThatDisagreeOnTheDeviceAreNamed) {
  const int n = World();
  if (n < 2) GTEST_SKIP() << "a disagreement needs two ranks";
  ThreadRanks job(n, Staged());
  std::vector<std::vector<float>> host(static_cast<size_t>(n), std::vector<float>(8, 1.0f));
  auto st = job.Run([&](int r, Session& s) {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    TensorView v = TensorView::Flat(host[static_cast<size_t>(r)].data(), DataType::kFloat32, 8);
    if (r == 0) v = OnGpu(io.Upload(host[0].data(), 32), DataType::kFloat32, {8});
    return s.AllreduceAsync("mixed", v, v, {ReduceOp::kSum}).Wait(kForever);
  });
  for (int r = 0; r < n; ++r) {
    const Status& s = st[static_cast<size_t>(r)];
    EXPECT_EQ(s.code(), StatusCode::kMismatch) << s.ToString();
    EXPECT_NE(s.message().find("rank 0 float32[8] sum on cuda"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("rank 1 float32[8] sum on cpu"), std::string::npos) << s.message();
  }
  // The job goes on.
  ExpectAllOk(job.Run([](int, Session& s) { return s.Barrier(); }));
}

// The blocking forms that write into a given output, with GPU tensors: the
// result lands in the caller's GPU memory. An output that does not fit fails
// that rank only; the others get their results and the job goes on.
TEST_P(DeviceTensors, BlockingFormsWriteIntoGpuOutputs) {
  const int n = World();
  ThreadRanks job(n, Staged());
  for (int64_t base : {0, 1, 1031}) {
    const int64_t cols = 3;
    auto rows_of = [&](int r) { return base == 0 ? 0 : base + r % 3; };
    constexpr size_t kRow = 3 * sizeof(float);
    std::vector<uint8_t> gathered;
    for (int r = 0; r < n; ++r) {
      const auto part =
          BytePattern(static_cast<size_t>(rows_of(r)) * kRow, r, static_cast<uint64_t>(base));
      gathered.insert(gathered.end(), part.begin(), part.end());
    }
    const int64_t total_rows = static_cast<int64_t>(gathered.size() / kRow);
    auto a2a_rows = [&](int p, int q) { return base == 0 ? 0 : (p + q + base) % 3; };
    std::vector<std::vector<uint8_t>> a2a_in;
    std::vector<std::vector<int64_t>> a2a_splits;
    MakeAlltoallInputs(n, a2a_rows, kRow, static_cast<uint64_t>(base), &a2a_in, &a2a_splits);
    auto st = job.Run([&](int r, Session& s) -> Status {
      DeviceIo io(s);
      if (!io.ok()) return io.error();
      const DataType f32 = DataType::kFloat32;
      const auto mine =
          BytePattern(static_cast<size_t>(rows_of(r)) * kRow, r, static_cast<uint64_t>(base));
      void* in = io.Upload(mine.data(), mine.size());
      void* all = io.Upload(nullptr, gathered.size());
      HORA_RETURN_IF_ERROR(
          s.Allgather(OnGpu(in, f32, {rows_of(r), cols}), OnGpu(all, f32, {total_rows, cols})));
      if (io.Download(all, gathered.size()) != gathered) return InternalError("allgather differs");
      // Reducescatter (sum) of the same input on every rank.
      std::vector<float> values(static_cast<size_t>(total_rows * cols));
      for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 13);
      void* rs_in = io.Upload(values.data(), values.size() * sizeof(float));
      const int64_t share = total_rows / n + (r < total_rows % n ? 1 : 0);
      int64_t first = 0;
      for (int q = 0; q < r; ++q) first += total_rows / n + (q < total_rows % n ? 1 : 0);
      void* part = io.Upload(nullptr, static_cast<size_t>(share) * kRow);
      HORA_RETURN_IF_ERROR(s.Reducescatter(OnGpu(rs_in, f32, {total_rows, cols}),
                                           OnGpu(part, f32, {share, cols}), {ReduceOp::kSum}));
      const auto bytes = io.Download(part, static_cast<size_t>(share) * kRow);
      for (int64_t i = 0; i < share * cols; ++i) {
        float v;
        std::memcpy(&v, bytes.data() + static_cast<size_t>(i) * sizeof(float), sizeof v);
        if (v != static_cast<float>(n) * values[static_cast<size_t>(first * cols + i)]) {
          return InternalError("reducescatter element " + std::to_string(i) + " is " +
                               std::to_string(v));
        }
      }
      // Alltoall with uneven splits.
      const auto& a_in = a2a_in[static_cast<size_t>(r)];
      const auto& splits = a2a_splits[static_cast<size_t>(r)];
      const auto want = AlltoallExpected(n, a2a_rows, kRow, a2a_in, r);
      void* a2a = io.Upload(a_in.data(), a_in.size());
      void* a2a_out = io.Upload(nullptr, want.size());
      std::vector<int64_t> received;
      HORA_RETURN_IF_ERROR(s.Alltoall(
          OnGpu(a2a, f32, {static_cast<int64_t>(a_in.size() / kRow), cols}), splits,
          OnGpu(a2a_out, f32, {static_cast<int64_t>(want.size() / kRow), cols}), &received));
      if (io.Download(a2a_out, want.size()) != want) return InternalError("alltoall differs");
      for (int q = 0; q < n; ++q) {
        if (received[static_cast<size_t>(q)] != a2a_rows(q, r))
          return InternalError("alltoall's received splits are wrong");
      }
      // Rank 0's output one row short: its call fails, the others' do not.
      if (total_rows == 0) return s.Barrier();  // (nothing to be short of)
      const int64_t out_rows = r == 0 ? total_rows - 1 : total_rows;
      const Status misfit =
          s.Allgather(OnGpu(in, f32, {rows_of(r), cols}), OnGpu(all, f32, {out_rows, cols}));
      if (r != 0) {
        HORA_RETURN_IF_ERROR(misfit);
        if (io.Download(all, gathered.size()) != gathered)
          return InternalError("allgather beside a misfit differs");
      } else if (misfit.ok() ||
                 misfit.message().find("does not fit the result") == std::string::npos) {
        return InternalError("a short output gave: " + misfit.ToString());
      }
      return s.Barrier();
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(st[static_cast<size_t>(r)].ok())
          << "base " << base << ": " << st[static_cast<size_t>(r)].ToString();
    }
  }
}

// `bytes` read from `data` on `stream` of `dev`, in that stream's order.
Result<std::vector<uint8_t>> ReadOnStream(gpu::Device& dev, gpu::Stream stream, const void* data,
                                          size_t bytes) {
  HORA_ASSIGN_OR_RETURN(void* pinned, dev.AllocatePinned(bytes));
  HORA_ASSIGN_OR_RETURN(gpu::Event e, dev.CreateEvent());
  Status st = dev.Copy(pinned, data, bytes, gpu::CopyKind::kDeviceToHost, stream);
  if (st.ok()) st = dev.Record(e, stream);
  if (st.ok()) st = dev.Wait(e, Clock::now() + std::chrono::seconds(30));
  std::vector<uint8_t> out(bytes);
  if (st.ok()) std::memcpy(out.data(), pinned, bytes);
  (void)dev.DestroyEvent(e);
  (void)dev.FreePinned(pinned);
  HORA_RETURN_IF_ERROR(st);
  return out;
}

// Async completion. Here the host device's copies back to the GPU start
// 100 ms late, so a handle completes well before its results are there:
// Wait waits for them; StreamWait makes a stream wait for them instead, so a
// copy queued on that stream reads the results, not the inputs; and a
// broadcast that comes next does not write the pinned buffer while the
// allreduce's copies back still read it.
TEST_P(DeviceTensors, HandlesAwaitTheCopiesBackOnTheHostOrOnAStream) {
  const int n = World();
  ThreadRanks job(n, Staged());
  constexpr size_t kCount = 1601;  // three chunks of 3000 bytes
  constexpr size_t kBytes = kCount * 4;
  const float sum = static_cast<float>(n * (n + 1) / 2);
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    auto* slow = dynamic_cast<gpu::HostDevice*>(&io.device());
    if (slow == nullptr) return Status::Ok();  // (a GPU's copies cannot be slowed)
    gpu::Device& dev = io.device();
    const std::vector<float> mine(kCount, static_cast<float>(r + 1));
    const std::vector<float> root(kCount, 42.0f);
    void* a = io.Upload(mine.data(), kBytes);
    void* b = io.Upload(mine.data(), kBytes);
    void* c = io.Upload(r == 0 ? root.data() : mine.data(), kBytes);
    const TensorView va = OnGpu(a, DataType::kFloat32, {kCount});
    const TensorView vb = OnGpu(b, DataType::kFloat32, {kCount});
    const TensorView vc = OnGpu(c, DataType::kFloat32, {kCount});
    slow->DelayCopiesToDevice(std::chrono::milliseconds(100));
    // The host waits.
    HORA_RETURN_IF_ERROR(s.AllreduceAsync("waited", va, va, {ReduceOp::kSum}).Wait(kForever));
    HORA_RETURN_IF_ERROR(ExpectFloats(io.Download(a, kBytes), sum, "after Wait"));
    // A stream waits; a broadcast follows at once.
    HORA_ASSIGN_OR_RETURN(const gpu::Stream user, dev.CreateStream());
    Handle hb = s.AllreduceAsync("on a stream", vb, vb, {ReduceOp::kSum});
    Status st = hb.StreamWait(user.id, kForever);
    if (st.ok()) st = s.Broadcast(vc, 0);
    Result<std::vector<uint8_t>> got =
        st.ok() ? ReadOnStream(dev, user, b, kBytes) : Result<std::vector<uint8_t>>(st);
    (void)dev.DestroyStream(user);
    HORA_RETURN_IF_ERROR(got.status());
    HORA_RETURN_IF_ERROR(ExpectFloats(*got, sum, "read on the stream after StreamWait"));
    HORA_RETURN_IF_ERROR(hb.Wait(kForever));
    if (!hb.Poll()) return InternalError("Poll() is false after Wait()");
    slow->DelayCopiesToDevice(Duration::zero());
    HORA_RETURN_IF_ERROR(ExpectFloats(io.Download(c, kBytes), 42.0f, "broadcast"));
    // The host does not wait for the copies back: while they are held (on
    // the staged paths at several ranks, copies from host memory; a tensor
    // of one chunk), StreamWait hands them to the stream and returns, and
    // the handle is not done until they are.
    if (n == 1 || OnWindow() || ByNccl()) return Status::Ok();
    constexpr size_t kSmall = 500;
    void* e = io.Upload(mine.data(), kSmall * 4);
    const TensorView ve = OnGpu(e, DataType::kFloat32, {kSmall});
    HORA_ASSIGN_OR_RETURN(const gpu::Stream other, dev.CreateStream());
    slow->HoldCopies(gpu::CopyKind::kHostToDevice);
    Handle he = s.AllreduceAsync("held", ve, ve, {ReduceOp::kSum});
    st = he.StreamWait(other.id, std::chrono::seconds(10));
    const bool done_while_held = he.Poll();
    slow->ReleaseCopies();
    got = st.ok() ? ReadOnStream(dev, other, e, kSmall * 4) : Result<std::vector<uint8_t>>(st);
    (void)dev.DestroyStream(other);
    HORA_RETURN_IF_ERROR(got.status());
    if (done_while_held) return InternalError("the handle was done while its copies were held");
    HORA_RETURN_IF_ERROR(ExpectFloats(*got, sum, "read on the stream after a held copy"));
    return he.Wait(kForever);
  }));
}

// Staged in chunks, a chunk's collective and its copy back do not wait for
// the next chunk's copy in: with every copy to host memory after the first
// held (the host device's), chunk 0 is reduced and its copy back queued
// while chunk 1's copy in is still held. (The copies in are queued at once,
// each chunk's collective waiting only for its own: so on a GPU chunk k + 1
// is copied while chunk k is sent.)
TEST_P(DeviceTensors, AChunksCollectiveDoesNotWaitForTheNextChunksCopyIn) {
  const int n = World();
  if (n == 1 || std::string_view(std::get<1>(GetParam())) != "chunked") {
    GTEST_SKIP() << "staged in chunks, at two ranks or more";
  }
  ThreadRanks job(n, Staged());
  constexpr size_t kCount = 1601;  // three chunks of 3000 bytes
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    auto* slow = dynamic_cast<gpu::HostDevice*>(&io.device());
    if (slow == nullptr) return Status::Ok();  // (a GPU's copies cannot be held)
    const std::vector<float> mine(kCount, static_cast<float>(r + 1));
    void* d = io.Upload(mine.data(), kCount * 4);
    const TensorView v = OnGpu(d, DataType::kFloat32, {kCount});
    const uint64_t back = slow->copies(gpu::CopyKind::kHostToDevice);
    slow->HoldCopies(gpu::CopyKind::kDeviceToHost, /*pass=*/1);
    Handle h = s.AllreduceAsync("pipelined", v, v, {ReduceOp::kSum});
    bool overlapped = false;
    for (auto until = Clock::now() + std::chrono::seconds(10); Clock::now() < until;) {
      if ((overlapped = slow->copies(gpu::CopyKind::kHostToDevice) > back)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    slow->ReleaseCopies();
    HORA_RETURN_IF_ERROR(h.Wait(kForever));
    if (!overlapped) {
      return InternalError("chunk 0 was not copied back while chunk 1's copy in was held");
    }
    return ExpectFloats(io.Download(d, kCount * 4), static_cast<float>(n * (n + 1) / 2),
                        "pipelined");
  }));
}

// Rank r's `count` floats, 0 now and r + 1 once a producer on a stream of
// its own has worked 100 ms (on the host device; at once on a GPU), are
// reduced by `reduce` once Hora's stream (Session::GpuStream) waits for the
// producer; they must then be `want`.
Status ReduceWhatAProducerWritesLate(Session& s, DeviceIo& io, int r, size_t count,
                                     const std::function<Status(const TensorView&)>& reduce,
                                     float want, const std::string& what) {
  gpu::Device& dev = io.device();
  const std::vector<float> early(count, 0.0f);
  const std::vector<float> late(count, static_cast<float>(r + 1));
  void* t = io.Upload(early.data(), count * 4);
  void* final_values = io.Upload(late.data(), count * 4);
  HORA_ASSIGN_OR_RETURN(const gpu::Stream producer, dev.CreateStream());
  HORA_ASSIGN_OR_RETURN(const gpu::Event made, dev.CreateEvent());
  Status st;
  if (auto* host_dev = dynamic_cast<gpu::HostDevice*>(&dev); host_dev != nullptr) {
    st = host_dev->RunOnStream(producer,
                               [] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); });
  }
  if (st.ok()) st = dev.Copy(t, final_values, count * 4, gpu::CopyKind::kDeviceToDevice, producer);
  if (st.ok()) st = dev.Record(made, producer);
  Result<uint64_t> hora_stream = s.GpuStream();
  if (st.ok()) st = hora_stream.status();
  if (st.ok()) st = dev.StreamWait(gpu::Stream{*hora_stream}, made);
  if (st.ok()) st = reduce(OnGpu(t, DataType::kFloat32, {static_cast<int64_t>(count)}));
  (void)dev.DestroyEvent(made);
  (void)dev.DestroyStream(producer);
  HORA_RETURN_IF_ERROR(st);
  return ExpectFloats(io.Download(t, count * 4), want, what);
}

// A C++ producer whose work is still queued on a stream of its own: Hora's
// stream (Session::GpuStream) waits for it, and the collective reads what
// the producer wrote, with no wait on the host.
TEST_P(DeviceTensors, ACppProducerHandsItsWorkToHorasStream) {
  const int n = World();
  ThreadRanks job(n, Staged());
  constexpr size_t kCount = 1601;
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    // (The producer's delay, RunOnStream, is the host device's.)
    if (dynamic_cast<gpu::HostDevice*>(&io.device()) == nullptr) return Status::Ok();
    return ReduceWhatAProducerWritesLate(
        s, io, r, kCount, [&](const TensorView& v) { return s.Allreduce(v, v, {ReduceOp::kSum}); },
        static_cast<float>(n * (n + 1) / 2), "after the producer's late write");
  }));
}

// A process set's collectives run on a GPU stream of the set's own, with an
// NCCL communicator of its own on the nccl path, and on device windows of
// its own on the window path (a set of two ranks or more):
//  - that stream waits for Hora's stream, so a C++ producer ordered before
//    Hora's stream (a write 100 ms late, on the host device) is seen by a
//    set's allreduce as by the global set's;
//  - on Hora's own paths, ranks that call two sets' collectives in
//    opposite orders get every result. Through NCCL, which asks for one
//    order of calls on every rank, they call them in one order
//    (process_sets_nccl_test.cc tests that order where it matters; the
//    host device's NCCL makes opposite orders wait for each other until
//    HORA_TIMEOUT_S).
TEST_P(DeviceTensors, AProcessSetRunsOnAStreamOfItsOwn) {
  const int n = World();
  if (n < 2) GTEST_SKIP() << "a set besides the global one needs two ranks";
  ThreadRanks job(n, Staged());
  constexpr size_t kCount = 1601;
  std::vector<int> members(static_cast<size_t>(n - 1));  // every rank but the last
  std::iota(members.begin(), members.end(), 0);
  std::vector<int> ids(static_cast<size_t>(n), -1);
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    HORA_ASSIGN_OR_RETURN(ids[static_cast<size_t>(r)], s.AddProcessSet(members));
    return Status::Ok();
  }));
  const int set = ids[0];
  const float global_sum = static_cast<float>(n * (n + 1) / 2);
  const float set_sum = static_cast<float>((n - 1) * n / 2);
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    const bool in_set = r < n - 1;
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    if (in_set) {
      HORA_RETURN_IF_ERROR(ReduceWhatAProducerWritesLate(
          s, io, r, kCount,
          [&](const TensorView& v) {
            return s.AllreduceAsync("late", v, v, {ReduceOp::kSum}, set).Wait(kForever);
          },
          set_sum, "the set's allreduce"));
    }
    // Both sets, in opposite orders on odd and even ranks (through NCCL: in
    // one order), 20 times.
    const bool set_first = r % 2 == 1 && !ByNccl();
    const std::vector<float> mine(kCount, static_cast<float>(r + 1));
    void* in = io.Upload(mine.data(), kCount * 4);
    void* a = io.Upload(nullptr, kCount * 4);
    void* b = io.Upload(nullptr, kCount * 4);
    const TensorView vin = OnGpu(in, DataType::kFloat32, {kCount});
    const TensorView va = OnGpu(a, DataType::kFloat32, {kCount});
    const TensorView vb = OnGpu(b, DataType::kFloat32, {kCount});
    for (int i = 0; i < 20; ++i) {
      const std::string k = std::to_string(i);
      Handle global, of_set;
      if (!set_first) {
        global = s.AllreduceAsync("global." + k, vin, va, {ReduceOp::kSum});
        if (in_set) of_set = s.AllreduceAsync("set." + k, vin, vb, {ReduceOp::kSum}, set);
      } else {
        if (in_set) of_set = s.AllreduceAsync("set." + k, vin, vb, {ReduceOp::kSum}, set);
        global = s.AllreduceAsync("global." + k, vin, va, {ReduceOp::kSum});
      }
      HORA_RETURN_IF_ERROR(global.Wait(kForever));
      HORA_RETURN_IF_ERROR(ExpectFloats(io.Download(a, kCount * 4), global_sum, "global " + k));
      if (in_set) {
        HORA_RETURN_IF_ERROR(of_set.Wait(kForever));
        HORA_RETURN_IF_ERROR(ExpectFloats(io.Download(b, kCount * 4), set_sum, "set " + k));
      }
    }
    return Status::Ok();
  }));
  if (ByNccl()) {
    EXPECT_GT(job.session(0).engine_counters(set).nccl_batches, 0u)
        << "the process set's allreduces did not run through NCCL";
  }
  // A set of two ranks or more has host windows of its own, and so device
  // windows where the job's allreduces take them.
  if (OnWindow() && n > 2) {
    EXPECT_GT(job.session(0).engine_counters(set).window_batches, 0u)
        << "no allreduce of the process set ran on its device window";
  }
}

// A steady step creates no device events: the chunks' events and the
// handles' done events are kept and used again.
TEST_P(DeviceTensors, ASteadyStepCreatesNoEvents) {
  const int n = World();
  ThreadRanks job(n, Staged());
  constexpr size_t kCount = 4099;  // several chunks of 3000 bytes
  ExpectAllOk(job.Run([&](int r, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    auto* host_dev = dynamic_cast<gpu::HostDevice*>(&io.device());
    if (host_dev == nullptr) return Status::Ok();  // (the host device counts them)
    const std::vector<float> mine(kCount, static_cast<float>(r + 1));
    void* d = io.Upload(mine.data(), kCount * 4);
    const TensorView v = OnGpu(d, DataType::kFloat32, {kCount});
    auto step = [&] { return s.AllreduceAsync("steady", v, v, {ReduceOp::kMax}).Wait(kForever); };
    for (int i = 0; i < 3; ++i) HORA_RETURN_IF_ERROR(step());  // (warm)
    const uint64_t before = host_dev->events_created();
    for (int i = 0; i < 50; ++i) HORA_RETURN_IF_ERROR(step());
    const uint64_t made = host_dev->events_created() - before;
    if (made > 0) return InternalError(std::to_string(made) + " events made in 50 steady steps");
    return ExpectFloats(io.Download(d, kCount * 4), static_cast<float>(n), "max");
  }));
}

INSTANTIATE_TEST_SUITE_P(Worlds, DeviceTensors,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values("whole", "chunked", "window",
                                                              "nccl")),
                         [](const ::testing::TestParamInfo<DeviceTensors::ParamType>& info) {
                           return "np" + std::to_string(std::get<0>(info.param)) + "_" +
                                  std::get<1>(info.param);
                         });

}  // namespace
}  // namespace hora::testing
