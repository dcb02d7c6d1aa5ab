// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The Device contract on a real GPU (ctest -L gpu): memory, pinned copies,
// stream order, events and bounded waits, pointer attributes (a buffer id
// that changes when memory is freed and allocated again), the batched copy,
// and every kernel against the CPU's kernels, bit for bit (a NaN matching
// any NaN). Without a usable
// GPU it says why and exits 77, which ctest counts as skipped. A program
// of its own, with no test framework: the GPU machine's image may lack
// GoogleTest.
//
//   build/bin/hora-gpu-check [ordinal]
//   build/bin/hora-gpu-check --probe   (only whether GPU 0 opens: 0, or 77;
//                                       tests/gpu/if_gpu.sh uses it)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/cuda/cuda_device.h"
#include "gpu/pointer_cache.h"
#include "kernels/reduce.h"

namespace hora::gpu {
namespace {

int failures = 0;

void Check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::printf("FAIL: %s\n", what.c_str());
  }
}

void CheckOk(const Status& st, const std::string& what) {
  Check(st.ok(), what + (st.ok() ? "" : ": " + st.ToString()));
}

// Element i's bits (an element is at most 8 bytes).
uint64_t Bits(const std::vector<std::byte>& v, size_t i, size_t es) {
  uint64_t b = 0;
  std::memcpy(&b, v.data() + i * es, es);
  return b;
}

bool IsNaN(DataType dtype, uint64_t b) {
  switch (dtype) {
    case DataType::kFloat16:
      return (b & 0x7c00) == 0x7c00 && (b & 0x03ff) != 0;
    case DataType::kBFloat16:
      return (b & 0x7f80) == 0x7f80 && (b & 0x007f) != 0;
    case DataType::kFloat32:
      return (b & 0x7f800000) == 0x7f800000 && (b & 0x007fffff) != 0;
    case DataType::kFloat64:
      return (b & 0x7ff0000000000000) == 0x7ff0000000000000 && (b & 0x000fffffffffffff) != 0;
    default:
      return false;
  }
}

// The GPU's result against the CPU's, bit for bit, except that a NaN
// matches any NaN: IEEE 754 leaves a result's NaN payload open, and a GPU's
// float arithmetic gives its canonical NaN where the CPU keeps the input's.
// The first difference is printed.
void CheckSame(DataType dtype, const std::vector<std::byte>& got,
               const std::vector<std::byte>& want, const std::string& what) {
  const size_t es = DataTypeSize(dtype);
  size_t differ = got.size() == want.size() ? 0 : 1;
  for (size_t i = 0; differ == 0 && i < want.size() / es; ++i) {
    const uint64_t g = Bits(got, i, es), w = Bits(want, i, es);
    if (g != w && !(IsNaN(dtype, g) && IsNaN(dtype, w))) {
      ++differ;
      std::printf("  %s: element %zu is 0x%llx, the CPU's 0x%llx\n", what.c_str(), i,
                  static_cast<unsigned long long>(g), static_cast<unsigned long long>(w));
    }
  }
  Check(differ == 0, what);
}

struct Gpu {
  Device& d;
  Stream s;
  Event done;
  void* staging;
  size_t staging_bytes;

  void Sync() {
    CheckOk(d.Record(done, s), "record");
    CheckOk(d.Wait(done, Clock::now() + std::chrono::seconds(30)), "wait");
  }
  void Upload(void* dst, const void* src, size_t bytes) {
    std::memcpy(staging, src, bytes);
    CheckOk(d.Copy(dst, staging, bytes, CopyKind::kHostToDevice, s), "upload");
    Sync();
  }
  std::vector<std::byte> Download(const void* src, size_t bytes) {
    CheckOk(d.Copy(staging, src, bytes, CopyKind::kDeviceToHost, s), "download");
    Sync();
    auto* p = static_cast<std::byte*>(staging);
    return std::vector<std::byte>(p, p + bytes);
  }
};

std::vector<std::byte> Values(DataType dtype, size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(count * DataTypeSize(dtype));
  // (bool: half zeros, half any other byte, which is true too)
  for (auto& b : out) {
    b = static_cast<std::byte>(dtype != DataType::kBool ? rng()
                                                        : (rng() % 2 ? 0 : 1 + rng() % 255));
  }
  return out;
}

void Kernels(Gpu& g) {
  constexpr size_t kCount = 100003;  // odd, many blocks
  constexpr int kSources = 11;       // more than one launch folds
  for (DataType dtype : kAllDataTypes) {
    const std::string name = DataTypeName(dtype);
    const size_t bytes = kCount * DataTypeSize(dtype);
    std::vector<std::vector<std::byte>> in;
    std::vector<const void*> dev_in;
    for (int k = 0; k < kSources; ++k) {
      in.push_back(Values(dtype, kCount, static_cast<uint32_t>(31 * k + 7)));
      void* p = g.d.Allocate(bytes).value();
      g.Upload(p, in.back().data(), bytes);
      dev_in.push_back(p);
    }
    void* out = g.d.Allocate(bytes).value();
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      std::vector<std::byte> want = in[0];
      for (int k = 1; k < kSources; ++k)
        kernels::Reduce(dtype, op, want.data(), in[k].data(), kCount);
      CheckOk(g.d.Reduce(dtype, op, out, dev_in, kCount, g.s), "reduce " + name);
      CheckSame(dtype, g.Download(out, bytes), want,
                "reduce " + name + " " + ReduceOpName(op) + " = CPU");
    }
    {
      // The destination may be a source, even one a later launch reads.
      std::vector<std::byte> want = in[0];
      for (int k = 1; k < kSources; ++k) {
        kernels::Reduce(dtype, ReduceOp::kSum, want.data(), in[k].data(), kCount);
      }
      void* last = const_cast<void*>(dev_in.back());
      CheckOk(g.d.Reduce(dtype, ReduceOp::kSum, last, dev_in, kCount, g.s), "reduce aliased");
      CheckSame(dtype, g.Download(last, bytes), want,
                "reduce " + name + " into its last source = CPU");
      g.Upload(last, in.back().data(), bytes);
    }
    {
      // Sources one element past their allocations' starts: not 16-byte
      // aligned (for 1- to 8-byte elements), so the one-element-per-thread
      // kernel runs, where the aligned calls above took 16-byte words.
      const size_t es = DataTypeSize(dtype);
      std::vector<const void*> shifted;
      std::vector<std::byte> want(in[0].begin() + static_cast<ptrdiff_t>(es), in[0].end());
      for (int k = 0; k < kSources; ++k) {
        shifted.push_back(static_cast<const std::byte*>(dev_in[k]) + es);
        if (k > 0) {
          kernels::Reduce(dtype, ReduceOp::kSum, want.data(), in[k].data() + es, kCount - 1);
        }
      }
      CheckOk(g.d.Reduce(dtype, ReduceOp::kSum, out, shifted, kCount - 1, g.s), "reduce shifted");
      CheckSame(dtype, g.Download(out, bytes - es), want,
                "reduce " + name + " of unaligned sources = CPU");
    }
    if (dtype == DataType::kBool) {  // (its one factor: bytes other than 0 and 1 made 1)
      std::vector<std::byte> want(bytes);
      kernels::Scale(dtype, 1.0, want.data(), in[0].data(), kCount);
      CheckOk(g.d.Scale(dtype, 1.0, out, dev_in[0], kCount, g.s), "scale bool");
      CheckSame(dtype, g.Download(out, bytes), want, "scale bool by 1");
    } else {
      for (double factor : {0.37, -2.5, 1e30}) {
        std::vector<std::byte> want(bytes);
        kernels::Scale(dtype, factor, want.data(), in[0].data(), kCount);
        CheckOk(g.d.Scale(dtype, factor, out, dev_in[0], kCount, g.s), "scale " + name);
        CheckSame(dtype, g.Download(out, bytes), want,
                  "scale " + name + " by " + std::to_string(factor));
      }
      std::vector<std::byte> want = in[1];
      kernels::Finalize(dtype, ReduceOp::kAverage, 3, 2.5, want.data(), kCount);
      g.Upload(out, in[1].data(), bytes);
      CheckOk(g.d.Finalize(dtype, ReduceOp::kAverage, 3, 2.5, out, kCount, g.s), "finalize");
      CheckSame(dtype, g.Download(out, bytes), want,
                "finalize (average of 3, postscale 2.5) " + name);
    }
    for (const void* p : dev_in) CheckOk(g.d.Free(const_cast<void*>(p)), "free");
    CheckOk(g.d.Free(out), "free");
  }
}

void MemoryAndPointers(Gpu& g) {
  void* a = g.d.Allocate(1 << 20).value();
  const PointerInfo info = g.d.QueryPointer(static_cast<char*>(a) + 4096).value();
  Check(info.kind == MemoryKind::kDevice && info.base == reinterpret_cast<uintptr_t>(a),
        "device pointer: kind and base");
  Check(g.d.QueryPointer(g.staging).value().kind == MemoryKind::kPinned, "pinned pointer");
  int local = 0;
  Check(g.d.QueryPointer(&local).value().kind == MemoryKind::kHost, "pageable pointer");
  const uint64_t id = info.buffer_id;
  CheckOk(g.d.Free(a), "free");
  void* b = g.d.Allocate(1 << 20).value();
  if (b == a) Check(g.d.QueryPointer(b).value().buffer_id != id, "reused address: new buffer id");
  PointerCache cache(g.d, PointerCache::Policy::kTrust);
  for (int i = 0; i < 1000; ++i) (void)cache.Lookup(static_cast<char*>(b) + i * 64);
  Check(cache.queries() == 1, "1000 cached lookups ask the driver once");
  std::vector<int> pageable(16);
  Check(!g.d.Copy(b, pageable.data(), 64, CopyKind::kHostToDevice, g.s).ok(),
        "a copy from pageable memory is refused");
  CheckOk(g.d.Free(b), "free");
}

void CopiesAndEvents(Gpu& g) {
  constexpr size_t kBytes = 1 << 20;
  std::vector<std::byte> data = Values(DataType::kUInt8, kBytes, 5);
  auto* src = static_cast<std::byte*>(g.d.Allocate(kBytes).value());
  auto* dst = static_cast<std::byte*>(g.d.Allocate(kBytes).value());
  g.Upload(src, data.data(), kBytes);
  CheckOk(g.d.Memset(dst, 0, kBytes, g.s), "memset");
  // Parts aligned to 16 bytes, to 4, and not; empty; reversed.
  std::vector<CopyPart> parts = {{dst, src + 4096, 65536},
                                 {dst + 65536, src + 3, 1001},
                                 {dst + 70000, src, 0},
                                 {dst + 70004, src + 8, 4004}};  // (4-byte words)
  for (int i = 0; i < 300; ++i) parts.push_back({dst + 100000 + i * 16, src + i * 32, 16});
  CheckOk(g.d.BatchedCopy(parts, g.s), "batched copy");
  const std::vector<std::byte> got = g.Download(dst, kBytes);
  bool same = true;
  for (const CopyPart& p : parts) {
    const size_t at = static_cast<std::byte*>(p.dst) - dst;
    const size_t from = static_cast<const std::byte*>(p.src) - src;
    same = same && std::memcmp(got.data() + at, data.data() + from, p.bytes) == 0;
  }
  Check(same, "batched copy: every part");
  Event e = g.d.CreateEvent().value();
  Check(g.d.Query(e).value(), "an event never recorded is complete");
  CheckOk(g.d.DestroyEvent(e), "destroy event");
  CheckOk(g.d.Free(src), "free");
  CheckOk(g.d.Free(dst), "free");
}

}  // namespace
}  // namespace hora::gpu

int main(int argc, char** argv) {
  using namespace hora::gpu;
  if (argc > 1 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0)) {
    std::printf(
        "usage: hora-gpu-check [ORDINAL | --probe]\n"
        "Checks Hora's CUDA device and kernels on GPU ORDINAL (default 0) against the CPU's;\n"
        "exits 0 when every check passes, 1 when one fails, 77 where there is no usable GPU.\n"
        "--probe: only opens GPU 0 and says which it is (0), or why there is none (77).\n");
    return 0;
  }
  const bool probe = argc > 1 && std::strcmp(argv[1], "--probe") == 0;
  const int ordinal = argc > 1 && !probe ? std::atoi(argv[1]) : 0;
  auto opened = OpenCudaDevice(ordinal);
  if (!opened.ok()) {
    std::printf("no GPU: %s\n", opened.status().ToString().c_str());
    return 77;
  }
  Device& d = **opened;
  std::printf("device: %s (ordinal %d, %d multiprocessors)\n", d.info().name.c_str(),
              d.info().ordinal, d.info().multiprocessors);
  if (probe) return 0;
  constexpr size_t kStaging = size_t{8} << 20;
  Gpu g{d, d.CreateStream().value(), d.CreateEvent().value(), d.AllocatePinned(kStaging).value(),
        kStaging};
  MemoryAndPointers(g);
  CopiesAndEvents(g);
  Kernels(g);
  std::printf("%s: %d failure(s)\n", failures == 0 ? "PASS" : "FAIL", failures);
  return failures == 0 ? 0 : 1;
}
