// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// One rank of the GPU-tensor multi-process test, started by horarun: with
// HORA_DEVICE=host (GPU semantics on CPU memory; HORATEST_DEVICE=cuda on a
// GPU machine), runs allreduce (every dtype and op, scale factors, sizes 0
// to 300,000 elements, Adasum against the host path, a fused batch),
// broadcast from every root, allgather, reducescatter (grouped too, min,
// max and product) and alltoall on GPU tensors, reads each result back from the device and checks
// it against a reference computed here from every rank's (deterministic) input; then memory shared
// between the ranks' devices (IPC), and that the allreduces took the path HORATEST_EXPECT_WINDOW
// says. Prints "rank R: N device checks passed" and exits 0, or names the first failure and
// exits 1.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpu/blocking_copy.h"
#include "hora/hora.h"
#include "support/device_io.h"
#include "support/die_at.h"
#include "support/reference.h"

namespace {

using namespace hora;
using hora::testing::DeviceIo;
using hora::testing::OnGpu;

int g_checks = 0;

bool Check(const Status& st, const std::string& what) {
  if (st.ok()) return true;
  std::fprintf(stderr, "FAIL %s: %s\n", what.c_str(), st.ToString().c_str());
  return false;
}

bool Check(bool ok, const std::string& what) {
  if (!ok) std::fprintf(stderr, "FAIL %s\n", what.c_str());
  g_checks += ok ? 1 : 0;
  return ok;
}

bool Allreduces(Session& s, DeviceIo& io) {
  const int n = s.size();
  uint64_t seed = 11;
  for (DataType dtype : kAllDataTypes) {
    const size_t esize = DataTypeSize(dtype);
    // (The large size for the types training uses most; 0 to 1031 for all.)
    const bool large = dtype == DataType::kFloat32 || dtype == DataType::kInt32 ||
                       dtype == DataType::kBFloat16 || dtype == DataType::kFloat16 ||
                       dtype == DataType::kFloat64 || dtype == DataType::kUInt8;
    for (Reduction red : {Reduction{ReduceOp::kSum}, Reduction{ReduceOp::kAverage},
                          Reduction{ReduceOp::kMin}, Reduction{ReduceOp::kMax},
                          Reduction{ReduceOp::kProduct}, Reduction{ReduceOp::kSum, 0.5, 3.0}}) {
      const bool scaled = red.prescale_factor != 1.0 || red.postscale_factor != 1.0;
      if (dtype == DataType::kBool && (red.op == ReduceOp::kAverage || scaled)) continue;
      for (size_t count : {size_t{0}, size_t{1}, size_t{1031}, size_t{300000}}) {
        if (count == 300000 && !large) continue;
        ++seed;
        std::vector<uint8_t> host(count * esize);
        hora::testing::FillInput(dtype, red.op, host.data(), count, seed, s.rank());
        void* d = io.Upload(host.data(), host.size());
        const TensorView v = OnGpu(d, dtype, {static_cast<int64_t>(count)});
        const std::string what = std::string("allreduce ") + DataTypeName(dtype) + " " +
                                 ReduceOpName(red.op) + " count " + std::to_string(count);
        if (!Check(s.Allreduce(v, v, red), what)) return false;
        const auto got = io.Download(d, host.size());
        const std::string diff =
            hora::testing::CompareFilledAllreduce(n, dtype, red, seed, got.data(), count);
        if (!Check(diff.empty(), what + ": " + diff)) return false;
      }
    }
  }
  // Adasum (not element-wise): bit for bit what the same values give as
  // host tensors, float32 and float64, one size within a chunk and one of
  // several. (Adasum needs a power-of-two number of ranks.)
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    if ((n & (n - 1)) != 0) break;
    for (size_t count : {size_t{1031}, size_t{70001}}) {
      ++seed;
      std::vector<uint8_t> host(count * DataTypeSize(dtype));
      hora::testing::FillInput(dtype, ReduceOp::kAdasum, host.data(), count, seed, s.rank());
      void* d = io.Upload(host.data(), host.size());
      const std::vector<int64_t> shape{static_cast<int64_t>(count)};
      const std::string what =
          std::string("adasum ") + DataTypeName(dtype) + " count " + std::to_string(count);
      if (!Check(s.Allreduce(OnGpu(d, dtype, shape), OnGpu(d, dtype, shape), {ReduceOp::kAdasum}),
                 what)) {
        return false;
      }
      const TensorView on_host(host.data(), dtype, shape);
      if (!Check(s.Allreduce(on_host, on_host, {ReduceOp::kAdasum}), what + " (host)")) {
        return false;
      }
      if (!Check(io.Download(d, host.size()) == host, what + ": differs from the host's")) {
        return false;
      }
    }
  }
  // A fused batch: 32 tensors submitted at once.
  constexpr int kTensors = 32;
  std::vector<void*> ptrs;
  std::vector<Handle> handles;
  auto count_of = [](int i) { return static_cast<size_t>((i * 331) % 4000 + 1); };
  for (int i = 0; i < kTensors; ++i) {
    std::vector<float> host(count_of(i));
    hora::testing::FillInput(DataType::kFloat32, ReduceOp::kAverage, host.data(), host.size(),
                             500 + static_cast<uint64_t>(i), s.rank());
    ptrs.push_back(io.Upload(host.data(), host.size() * 4));
    const TensorView v =
        OnGpu(ptrs.back(), DataType::kFloat32, {static_cast<int64_t>(host.size())});
    handles.push_back(s.AllreduceAsync("grad." + std::to_string(i), v, v, {ReduceOp::kAverage}));
  }
  for (int i = 0; i < kTensors; ++i) {
    const std::string what = "fused allreduce tensor " + std::to_string(i);
    if (!Check(handles[static_cast<size_t>(i)].Wait(std::chrono::seconds(60)), what)) return false;
    const auto got = io.Download(ptrs[static_cast<size_t>(i)], count_of(i) * 4);
    const std::string diff = hora::testing::CompareFilledAllreduce(
        n, DataType::kFloat32, {ReduceOp::kAverage}, 500 + static_cast<uint64_t>(i), got.data(),
        count_of(i));
    if (!Check(diff.empty(), what + ": " + diff)) return false;
  }
  return true;
}

bool Others(Session& s, DeviceIo& io) {
  const int n = s.size();
  const int r = s.rank();
  for (int root = 0; root < n; ++root) {
    for (size_t bytes : {size_t{0}, size_t{5}, size_t{1} << 20}) {
      const auto mine = hora::testing::BytePattern(bytes, r, bytes);
      void* d = io.Upload(mine.data(), bytes);
      const std::string what =
          "broadcast root " + std::to_string(root) + " bytes " + std::to_string(bytes);
      if (!Check(s.Broadcast(OnGpu(d, DataType::kUInt8, {static_cast<int64_t>(bytes)}), root),
                 what)) {
        return false;
      }
      if (!Check(io.Download(d, bytes) == hora::testing::BytePattern(bytes, root, bytes), what)) {
        return false;
      }
    }
  }
  const int64_t cols = 5;
  const size_t row_bytes = cols * 4;
  auto rows_of = [](int q) { return 100 + 37 * q; };
  std::vector<uint8_t> gathered;
  for (int q = 0; q < n; ++q) {
    const auto part = hora::testing::BytePattern(static_cast<size_t>(rows_of(q)) * row_bytes, q, 3);
    gathered.insert(gathered.end(), part.begin(), part.end());
  }
  const auto mine = hora::testing::BytePattern(static_cast<size_t>(rows_of(r)) * row_bytes, r, 3);
  void* d = io.Upload(mine.data(), mine.size());
  auto all = s.Allgather(OnGpu(d, DataType::kInt32, {rows_of(r), cols}));
  if (!Check(all.status(), "allgather")) return false;
  if (!Check(all->device().type == DeviceType::kCUDA &&
                 io.Download(all->data(), all->num_bytes()) == gathered,
             "allgather's result on the device")) {
    return false;
  }
  // Alltoall: rank p sends (p + 2q) % 4 rows to rank q.
  auto a2a_rows = [](int p, int q) { return static_cast<int64_t>((p + 2 * q) % 4); };
  std::vector<std::vector<uint8_t>> in;
  std::vector<std::vector<int64_t>> splits;
  hora::testing::MakeAlltoallInputs(n, a2a_rows, row_bytes, 9, &in, &splits);
  int64_t in_rows = 0;
  for (int64_t v : splits[static_cast<size_t>(r)]) in_rows += v;
  void* a = io.Upload(in[static_cast<size_t>(r)].data(), in[static_cast<size_t>(r)].size());
  auto out =
      s.Alltoall(OnGpu(a, DataType::kInt32, {in_rows, cols}), splits[static_cast<size_t>(r)]);
  if (!Check(out.status(), "alltoall")) return false;
  if (!Check(io.Download(out->data(), out->num_bytes()) ==
                 hora::testing::AlltoallExpected(n, a2a_rows, row_bytes, in, r),
             "alltoall's result on the device")) {
    return false;
  }
  // Reducescatter, grouped, of dtypes and ops beyond the sum below: each
  // rank's rows against the reduction of every rank's input computed here.
  uint64_t seed = 900;
  for (DataType dtype : {DataType::kInt16, DataType::kFloat32, DataType::kBFloat16,
                         DataType::kInt64, DataType::kBool}) {
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      ++seed;
      const std::vector<int64_t> dims{1, 3 * int64_t{n} + 2};
      std::vector<TensorView> views;
      std::vector<hora::testing::Expected> expected;
      for (size_t t = 0; t < dims.size(); ++t) {
        const size_t count = static_cast<size_t>(dims[t] * cols);
        std::vector<std::vector<uint8_t>> every(static_cast<size_t>(n));
        std::vector<const void*> ptrs;
        for (int q = 0; q < n; ++q) {
          every[static_cast<size_t>(q)].resize(count * DataTypeSize(dtype));
          hora::testing::FillInput(dtype, op, every[static_cast<size_t>(q)].data(), count,
                                   seed + 50 * t, q);
          ptrs.push_back(every[static_cast<size_t>(q)].data());
        }
        expected.push_back(hora::testing::ReferenceAllreduce(dtype, {op}, ptrs, count));
        const auto& own = every[static_cast<size_t>(r)];
        views.push_back(OnGpu(io.Upload(own.data(), own.size()), dtype, {dims[t], cols}));
      }
      std::vector<Handle> h = s.GroupedReducescatterAsync("rs.group", views, {op});
      for (size_t t = 0; t < dims.size(); ++t) {
        const std::string what = std::string("grouped reducescatter ") + DataTypeName(dtype) + " " +
                                 ReduceOpName(op) + " dim0 " + std::to_string(dims[t]);
        if (!Check(h[t].Wait(std::chrono::seconds(60)), what)) return false;
        std::optional<Tensor> got = h[t].TakeOutput();
        if (!Check(got.has_value() && got->device().type == DeviceType::kCUDA, what + " output")) {
          return false;
        }
        int64_t at = 0;
        for (int q = 0; q < r; ++q) at += dims[t] / n + (q < dims[t] % n ? 1 : 0);
        const int64_t mine = dims[t] / n + (r < dims[t] % n ? 1 : 0);
        const auto bytes = io.Download(got->data(), got->num_bytes());
        const std::string diff =
            hora::testing::Compare(expected[t], bytes.data(), static_cast<size_t>(at * cols),
                                   static_cast<size_t>(mine * cols));
        if (!Check(diff.empty(), what + ": " + diff)) return false;
      }
    }
  }
  // Reducescatter: every rank gives 0..rows-1; each gets n times its rows.
  const int64_t rows = 1000 + n;
  std::vector<int32_t> ramp(static_cast<size_t>(rows));
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<int32_t>(i);
  void* rs = io.Upload(ramp.data(), ramp.size() * 4);
  auto part = s.Reducescatter(OnGpu(rs, DataType::kInt32, {rows}));
  if (!Check(part.status(), "reducescatter")) return false;
  int64_t first = 0;
  for (int q = 0; q < r; ++q) first += rows / n + (q < rows % n ? 1 : 0);
  const auto got = io.Download(part->data(), part->num_bytes());
  for (size_t i = 0; i < got.size() / 4; ++i) {
    int32_t v;
    std::memcpy(&v, got.data() + i * 4, 4);
    if (!Check(v == static_cast<int32_t>(n * (first + static_cast<int64_t>(i))),
               "reducescatter element " + std::to_string(i))) {
      return false;
    }
  }
  return true;
}

// IPC between the ranks' devices (CUDA IPC on a GPU; the host device maps
// the other process's memfd): each rank exports an allocation, the handles
// go round by allgather, each rank reads the next rank's bytes through the
// handle and writes a mark into them, which that rank then finds.
bool Ipc(Session& s, DeviceIo& io) {
  const int n = s.size();
  const int r = s.rank();
  if (n < 2) return true;  // (a device does not open its own memory)
  constexpr size_t kBytes = 5000;
  gpu::Device& dev = io.device();
  io.Upload(nullptr, 300);  // (so that the next is not at a page boundary)
  const auto mine = hora::testing::BytePattern(kBytes, r, 99);
  void* d = io.Upload(mine.data(), kBytes);
  Result<gpu::IpcMemHandle> h = dev.ExportMemory(d);
  if (!Check(h.status(), "export")) return false;
  Result<Tensor> all = s.Allgather(TensorView::Flat(h->bytes.data(), DataType::kUInt8, 64));
  if (!Check(all.status(), "allgather of the handles")) return false;
  const int next = (r + 1) % n;
  gpu::IpcMemHandle theirs;
  std::memcpy(theirs.bytes.data(), static_cast<const uint8_t*>(all->data()) + next * 64, 64);
  Result<void*> opened = dev.OpenMemory(theirs);
  if (!Check(opened.status(), "open rank " + std::to_string(next) + "'s memory")) return false;
  if (!Check(io.Download(*opened, kBytes) == hora::testing::BytePattern(kBytes, next, 99),
             "rank " + std::to_string(next) + "'s bytes through its handle")) {
    return false;
  }
  const std::vector<uint8_t> mark(64, static_cast<uint8_t>(0xE0 + r));
  if (!Check(
          gpu::CopyHostToDevice(dev, *opened, mark.data(), mark.size(), std::chrono::seconds(30)),
          "write into rank " + std::to_string(next) + "'s memory")) {
    return false;
  }
  if (!Check(s.Barrier(), "barrier")) return false;
  const int prev = (r + n - 1) % n;
  std::vector<uint8_t> want = mine;
  std::memset(want.data(), 0xE0 + prev, 64);
  if (!Check(io.Download(d, kBytes) == want,
             "rank " + std::to_string(prev) + "'s mark in this rank's memory")) {
    return false;
  }
  if (!Check(dev.CloseMemory(*opened), "close")) return false;
  return Check(s.Barrier(), "barrier");  // (each keeps its memory until the others closed it)
}

}  // namespace

// --die-at ITER: GPU allreduces until the last rank SIGKILLs itself at
// allreduce ITER (support/die_at.h); with HORATEST_EXPECT_WINDOW=1, 4 where
// none of them ran on the device windows.
int DieAt(Session& s, DeviceIo& io, int iteration) {
  std::vector<float> x(1 << 16, 1.0f);
  void* d = io.Upload(x.data(), x.size() * sizeof(float));
  const TensorView v = OnGpu(d, DataType::kFloat32, {static_cast<int64_t>(x.size())});
  const int rc = hora::testing::DieAt(s, iteration, false,
                                      [&] { return s.Allreduce(v, v, {ReduceOp::kAverage}); });
  const char* want = std::getenv("HORATEST_EXPECT_WINDOW");
  if (want != nullptr && std::strcmp(want, "1") == 0 && s.engine_counters().window_batches == 0) {
    std::printf("rank %d: no allreduce ran on the device windows\n", s.rank());
    return 4;
  }
  return rc;
}

// --lose-in-nccl ITER: GPU allreduces through NCCL (the host device's,
// its calls queued on the stream: HORA_GPU_BACKEND=nccl,
// HORA_NCCL_LIBRARY=host:queued), of which rank `lost`'s library
// (HORATEST_LOSE_RANK, the last by default) refuses the one of iteration
// ITER (main sets its HORA_NCCL_LIBRARY), while the others' calls are
// queued, waiting for it; then it SIGKILLs itself. Every other rank's
// allreduce ITER must fail, naming it, found lost by the watch of their
// NCCL work (nccl_lost_test.sh checks the text).
int LoseInNccl(Session& s, DeviceIo& io, int lost) {
  std::vector<float> x(1 << 12, 1.0f);
  void* d = io.Upload(x.data(), x.size() * sizeof(float));
  const TensorView v = OnGpu(d, DataType::kFloat32, {static_cast<int64_t>(x.size())});
  int i = 0;
  return hora::testing::DieAt(s, -1, false, [&] {
    const Status st = s.AllreduceAsync("x", v, v, {ReduceOp::kSum}).Wait(std::chrono::seconds(60));
    if (!st.ok() && s.rank() == lost) {
      std::fprintf(stderr, "rank %d: allreduce %d failed (%s); killing myself with SIGKILL\n",
                   s.rank(), i, st.ToString().c_str());
      std::fflush(stderr);
      raise(SIGKILL);
    }
    ++i;
    return st;
  });
}

// --fail-at ITER: GPU allreduces, each checked, of which the last rank's
// ITER-th (out of place) is of memory it frees once it submitted it, before
// the others come: every rank's fails, naming it (or, on it, saying so);
// the ten after are whole. Where HORATEST_EXPECT_SET_ASIDE is 1
// none of those ten runs on the device windows (a job spanning hosts sets
// them aside after a failure); where 0, each does.
int FailAt(Session& s, DeviceIo& io, int iteration) {
  constexpr size_t kCount = 20000;
  const int last = s.size() - 1;
  uint64_t at_failure = 0;
  for (int i = 0; i < iteration + 11; ++i) {
    const uint64_t seed = 700 + static_cast<uint64_t>(i);
    std::vector<float> host(kCount);
    hora::testing::FillInput(DataType::kFloat32, ReduceOp::kSum, host.data(), kCount, seed,
                             s.rank());
    void* d = io.Upload(host.data(), kCount * 4);
    const TensorView v = OnGpu(d, DataType::kFloat32, {static_cast<int64_t>(kCount)});
    const std::string what = "allreduce " + std::to_string(i);
    Status st;
    if (i == iteration) {
      Result<void*> input = io.device().Allocate(kCount * 4);
      if (!Check(input.status(), "an input to free")) return 1;
      const TensorView in = OnGpu(*input, DataType::kFloat32, {static_cast<int64_t>(kCount)});
      if (s.rank() != last) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      Handle h = s.AllreduceAsync(what, in, v, {ReduceOp::kSum});
      if (s.rank() == last && !Check(io.device().Free(*input), "freeing the input")) return 1;
      st = h.Wait(std::chrono::nanoseconds::max());
      if (s.rank() != last) (void)io.device().Free(*input);
    } else {
      st = s.AllreduceAsync(what, v, v, {ReduceOp::kSum}).Wait(std::chrono::nanoseconds::max());
    }
    if (i == iteration) {
      const std::string named = "rank " + std::to_string(last);
      if (!Check(!st.ok() && st.message().find(named) != std::string::npos,
                 what + " failed naming " + named + ": " + st.ToString())) {
        return 1;
      }
      at_failure = s.engine_counters().window_batches;
      continue;
    }
    if (!Check(st, what)) return 1;
    const std::string diff =
        hora::testing::CompareFilledAllreduce(s.size(), DataType::kFloat32, {ReduceOp::kSum}, seed,
                                              io.Download(d, kCount * 4).data(), kCount);
    if (!Check(diff.empty(), what + ": " + diff)) return 1;
  }
  const uint64_t after = s.engine_counters().window_batches - at_failure;
  if (const char* aside = std::getenv("HORATEST_EXPECT_SET_ASIDE")) {
    const bool set_aside = std::strcmp(aside, "1") == 0;
    if (!Check(set_aside ? after == 0 : after == 10,
               std::to_string(after) + " of the 10 allreduces after the failure ran on the " +
                   "device windows (HORATEST_EXPECT_SET_ASIDE=" + aside + ")")) {
      return 1;
    }
  }
  std::printf("rank %d of %d: %d device checks passed\n", s.rank(), s.size(), g_checks);
  return 0;
}

int main(int argc, char** argv) {
  const bool die = argc == 3 && std::strcmp(argv[1], "--die-at") == 0;
  const bool fail = argc == 3 && std::strcmp(argv[1], "--fail-at") == 0;
  const bool lose = argc == 3 && std::strcmp(argv[1], "--lose-in-nccl") == 0;
  if (argc > 1 && !die && !fail && !lose) {
    std::printf(
        "usage: hora-mp-device-worker [--die-at ITER | --fail-at ITER | --lose-in-nccl ITER]\n"
        "One rank of the GPU-tensor multi-process test (on the host device); run it under "
        "horarun.\n--die-at ITER: the last rank dies at GPU allreduce ITER.\n"
        "--fail-at ITER: the last rank's GPU allreduce ITER is of freed memory.\n"
        "--lose-in-nccl ITER: the NCCL call of allreduce ITER of the last rank (or of "
        "HORATEST_LOSE_RANK) is refused, and it dies, the others' calls queued.\n");
    return std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0 ? 0 : 2;
  }
  SessionOptions o;
  const char* device = std::getenv("HORATEST_DEVICE");  // "cuda" on a GPU machine
  o.settings = {{"HORA_DEVICE", device != nullptr ? device : "host"}};
  const char* rank = std::getenv("HORA_RANK");
  const char* size = std::getenv("HORA_SIZE");
  const char* lose_rank = std::getenv("HORATEST_LOSE_RANK");
  const int lost = lose_rank != nullptr ? std::atoi(lose_rank)
                   : size != nullptr    ? std::atoi(size) - 1
                                        : 0;
  if (lose && rank != nullptr && std::atoi(rank) == lost) {
    o.settings["HORA_NCCL_LIBRARY"] =
        "host:queued:refuse-call=" + std::to_string(std::atoi(argv[2]) + 1);
  }
  auto session = Session::Create(o);
  if (!Check(session.status(), "Session::Create")) return 1;
  Session& s = **session;
  DeviceIo io(s);
  if (!Check(io.error(), "the host device")) return 1;
  if (die) return DieAt(s, io, std::atoi(argv[2]));
  if (fail) return FailAt(s, io, std::atoi(argv[2]));
  if (lose) return LoseInNccl(s, io, lost);
  if (!Allreduces(s, io) || !Others(s, io) || !Ipc(s, io)) return 1;
  // Through NCCL where HORATEST_EXPECT_NCCL is 1.
  if (const char* want = std::getenv("HORATEST_EXPECT_NCCL")) {
    const uint64_t by_nccl = s.engine_counters().nccl_batches;
    if (!Check((by_nccl > 0) == (std::strcmp(want, "1") == 0),
               std::to_string(by_nccl) + " batches ran through NCCL (HORATEST_EXPECT_NCCL=" + want +
                   ")")) {
      return 1;
    }
  }
  // The path the allreduces took: HORATEST_EXPECT_WINDOW=1, on the ranks'
  // device windows; 0, staged through host memory.
  if (const char* want = std::getenv("HORATEST_EXPECT_WINDOW")) {
    const uint64_t on_window = s.engine_counters().window_batches;
    if (!Check((on_window > 0) == (std::strcmp(want, "1") == 0),
               std::to_string(on_window) + " allreduce batches ran on the device window (" +
                   "HORATEST_EXPECT_WINDOW=" + want + ")")) {
      return 1;
    }
  }
  std::printf("rank %d of %d: %d device checks passed\n", s.rank(), s.size(), g_checks);
  return 0;
}
