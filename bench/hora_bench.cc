// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// hora-bench: collective sweeps in nccl-tests' vocabulary, one process per
// rank under horarun (or mpirun).
//
//   horarun -np 2 build/bin/hora-bench allreduce [--sizes 4:64M] [--iters N]
//       [--warmup N] [--dtype f32] [--op sum] [--check]
//
// Per size (bytes, doubling from the low to the high end): count, time avg /
// p50 / p99 in microseconds over the iterations (each iteration's time is the
// slowest rank's), algbw = bytes / time, busbw = algbw * 2(n-1)/n, and the
// number of wrong elements when --check is given (the exit code is then 1 if
// any element was wrong). Rank 0 prints.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/units.h"
#include "hora/hora.h"

namespace {

using namespace hora;

struct Args {
  std::string collective;
  uint64_t min_bytes = 4, max_bytes = 64ull << 20;
  int iters = 20, warmup = 5;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  bool check = false;
};

int Usage(const char* why) {
  std::fprintf(stderr,
               "hora-bench: %s\nusage: hora-bench allreduce [--sizes LOW:HIGH] [--iters N] "
               "[--warmup N] [--dtype f32|f16|bf16|f64|i32|...] [--op sum|min|max|product|average] "
               "[--check]\n",
               why);
  return 2;
}

bool Parse(int argc, char** argv, Args& a, std::string& error) {
  if (argc < 2) return error = "no collective given", false;
  a.collective = argv[1];
  if (a.collective != "allreduce")
    return error = "unknown collective '" + a.collective + "'", false;
  for (int i = 2; i < argc; ++i) {
    std::string f = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (f == "--sizes") {
      std::string v = next();
      auto colon = v.find(':');
      auto lo = ParseBytes(v.substr(0, colon));
      auto hi = colon == std::string::npos ? lo : ParseBytes(v.substr(colon + 1));
      if (!lo || !hi || *lo == 0 || *hi < *lo)
        return error = "--sizes '" + v + "' is not LOW:HIGH", false;
      a.min_bytes = *lo;
      a.max_bytes = *hi;
    } else if (f == "--iters" || f == "--warmup") {
      int v = std::atoi(next().c_str());
      if (v < (f == "--iters" ? 1 : 0)) return error = f + " needs a count", false;
      (f == "--iters" ? a.iters : a.warmup) = v;
    } else if (f == "--dtype") {
      auto t = ParseDataType(next());
      if (!t) return error = "unknown --dtype", false;
      a.dtype = *t;
    } else if (f == "--op") {
      auto o = ParseReduceOp(next());
      if (!o) return error = "unknown --op", false;
      a.op = *o;
    } else if (f == "--check") {
      a.check = true;
    } else {
      return error = "unknown flag '" + f + "'", false;
    }
  }
  return true;
}

// Rank r's element i: small integers, so sums are exact in every float type.
double Value(int rank, size_t i) { return static_cast<double>((rank + 1) * ((i % 7) + 1) % 16); }

}  // namespace

int main(int argc, char** argv) {
  Args a;
  std::string error;
  if (!Parse(argc, argv, a, error)) return Usage(error.c_str());
  auto session = Session::Create({});
  if (!session.ok()) {
    std::fprintf(stderr, "hora-bench: %s\n", session.status().ToString().c_str());
    return 1;
  }
  Session& s = **session;
  const int n = s.size();
  const size_t esize = DataTypeSize(a.dtype);
  if (s.rank() == 0) {
    std::printf("# hora-bench %s: %d ranks, dtype %s, op %s, %d iterations after %d warm-up\n",
                a.collective.c_str(), n, DataTypeName(a.dtype), ReduceOpName(a.op), a.iters,
                a.warmup);
    std::printf("# %12s %12s %10s %10s %10s %10s %10s %8s\n", "size(B)", "count", "avg(us)",
                "p50(us)", "p99(us)", "algbw", "busbw", "#wrong");
    std::printf("# %12s %12s %10s %10s %10s %10s %10s %8s\n", "", "", "", "", "", "(GB/s)",
                "(GB/s)", "");
  }
  long total_wrong = 0;
  std::vector<double> times;
  for (uint64_t bytes = a.min_bytes; bytes <= a.max_bytes; bytes *= 2) {
    const size_t count = std::max<size_t>(1, bytes / esize);
    std::vector<uint8_t> buf(count * esize), init(count * esize);
    // --check covers f32, f64, i32 and i64; other dtypes are timed on zeros.
    for (size_t i = 0; i < count; ++i) {
      const double v = Value(s.rank(), i);
      switch (a.dtype) {
        case DataType::kFloat32:
          reinterpret_cast<float*>(init.data())[i] = static_cast<float>(v);
          break;
        case DataType::kFloat64:
          reinterpret_cast<double*>(init.data())[i] = v;
          break;
        case DataType::kInt32:
          reinterpret_cast<int32_t*>(init.data())[i] = static_cast<int32_t>(v);
          break;
        case DataType::kInt64:
          reinterpret_cast<int64_t*>(init.data())[i] = static_cast<int64_t>(v);
          break;
        default:
          break;
      }
    }
    times.clear();
    for (int it = 0; it < a.warmup + a.iters; ++it) {
      std::memcpy(buf.data(), init.data(), buf.size());
      Status b = s.Barrier();
      const auto t0 = std::chrono::steady_clock::now();
      Status st = s.Allreduce(TensorView::Flat(buf.data(), a.dtype, count),
                              TensorView::Flat(buf.data(), a.dtype, count), {a.op});
      double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (!b.ok() || !st.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", s.rank(), (b.ok() ? st : b).ToString().c_str());
        return 1;
      }
      // The iteration's time is the slowest rank's.
      double slowest = us;
      Status m = s.Allreduce(TensorView::Flat(&us, DataType::kFloat64, 1),
                             TensorView::Flat(&slowest, DataType::kFloat64, 1), {ReduceOp::kMax});
      if (!m.ok()) return 1;
      if (it >= a.warmup) times.push_back(slowest);
    }
    long wrong = 0;
    if (a.check &&
        (a.dtype == DataType::kFloat32 || a.dtype == DataType::kFloat64 ||
         a.dtype == DataType::kInt32 || a.dtype == DataType::kInt64) &&
        a.op == ReduceOp::kSum) {
      for (size_t i = 0; i < count; ++i) {
        double want = 0;
        for (int r = 0; r < n; ++r) want += Value(r, i);
        double got = a.dtype == DataType::kFloat32   ? reinterpret_cast<float*>(buf.data())[i]
                     : a.dtype == DataType::kFloat64 ? reinterpret_cast<double*>(buf.data())[i]
                     : a.dtype == DataType::kInt32
                         ? reinterpret_cast<int32_t*>(buf.data())[i]
                         : static_cast<double>(reinterpret_cast<int64_t*>(buf.data())[i]);
        wrong += got != want;
      }
      double w = static_cast<double>(wrong), total = 0;
      if (!s.Allreduce(TensorView::Flat(&w, DataType::kFloat64, 1),
                       TensorView::Flat(&total, DataType::kFloat64, 1))
               .ok())
        return 1;
      wrong = static_cast<long>(total);
      total_wrong += wrong;
    }
    std::sort(times.begin(), times.end());
    double avg = 0;
    for (double t : times) avg += t;
    avg /= static_cast<double>(times.size());
    const double p50 = times[times.size() / 2];
    const double p99 =
        times[std::min(times.size() - 1, static_cast<size_t>(std::ceil(times.size() * 0.99)) - 1)];
    const double algbw = static_cast<double>(count * esize) / (avg * 1e-6) / 1e9;
    const double busbw = algbw * 2.0 * (n - 1) / n;
    if (s.rank() == 0) {
      std::printf("  %12zu %12zu %10.1f %10.1f %10.1f %10.3f %10.3f %8s\n", count * esize, count,
                  avg, p50, p99, algbw, busbw, a.check ? std::to_string(wrong).c_str() : "-");
    }
  }
  return total_wrong == 0 ? 0 : 1;
}
