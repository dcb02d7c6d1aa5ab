// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "support/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>
#include <type_traits>

#include "kernels/half.h"

namespace hora::testing {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Rounds a double to the storage type and back (what storing it would keep).
double RoundTo(DataType t, double v) {
  switch (t) {
    case DataType::kFloat16:
      return kernels::Float16ToFloat(kernels::FloatToFloat16(static_cast<float>(v)));
    case DataType::kBFloat16:
      return kernels::BFloat16ToFloat(kernels::FloatToBFloat16(static_cast<float>(v)));
    case DataType::kFloat32:
      return static_cast<float>(v);
    default:
      return v;
  }
}

void StoreFloat(DataType t, void* data, size_t i, double v) {
  switch (t) {
    case DataType::kFloat16: {
      uint16_t h = kernels::FloatToFloat16(static_cast<float>(v));
      std::memcpy(static_cast<uint16_t*>(data) + i, &h, 2);
      break;
    }
    case DataType::kBFloat16: {
      uint16_t h = kernels::FloatToBFloat16(static_cast<float>(v));
      std::memcpy(static_cast<uint16_t*>(data) + i, &h, 2);
      break;
    }
    case DataType::kFloat32:
      static_cast<float*>(data)[i] = static_cast<float>(v);
      break;
    default:
      static_cast<double*>(data)[i] = v;
      break;
  }
}

template <typename T>
T ScaleInt(T x, double f) {  // round toward zero, saturate
  double v = std::trunc(static_cast<double>(x) * f);
  if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

template <typename T>
void FillInt(ReduceOp op, T* out, size_t count, uint64_t seed, int rank) {
  for (size_t i = 0; i < count; ++i) {
    uint64_t h = Mix(seed ^ Mix(static_cast<uint64_t>(rank) * 1000003u + i));
    if (op == ReduceOp::kProduct) {
      int64_t small = static_cast<int64_t>(h % 7) - 3;  // [-3, 3]
      if constexpr (std::is_unsigned_v<T>) small = static_cast<int64_t>(h % 4);
      out[i] = static_cast<T>(small);
    } else {
      T v;
      std::memcpy(&v, &h, sizeof(T));
      out[i] = v;
    }
  }
}

template <typename T>
void ReferenceInt(const Reduction& red, const std::vector<const void*>& inputs, size_t count,
                  std::vector<uint8_t>& out) {
  using U = std::make_unsigned_t<T>;
  const size_t n = inputs.size();
  out.resize(count * sizeof(T));
  for (size_t i = 0; i < count; ++i) {
    U acc = 0;
    T best = 0;
    for (size_t r = 0; r < n; ++r) {
      T x;
      std::memcpy(&x, static_cast<const T*>(inputs[r]) + i, sizeof(T));
      if (red.prescale_factor != 1.0) x = ScaleInt<T>(x, red.prescale_factor);
      switch (red.op) {
        case ReduceOp::kSum:
        case ReduceOp::kAverage:
          acc = static_cast<U>(acc + static_cast<U>(x));
          break;
        case ReduceOp::kProduct:
          acc = r == 0 ? static_cast<U>(x) : static_cast<U>(acc * static_cast<U>(x));
          break;
        case ReduceOp::kMin:
          best = r == 0 ? x : std::min(best, x);
          break;
        case ReduceOp::kMax:
          best = r == 0 ? x : std::max(best, x);
          break;
        case ReduceOp::kAdasum:  // not element-wise: allreduce_adasum_test.cc
          std::abort();
      }
    }
    T result = (red.op == ReduceOp::kMin || red.op == ReduceOp::kMax) ? best : static_cast<T>(acc);
    if (red.op == ReduceOp::kAverage) result = static_cast<T>(result / static_cast<T>(n));
    if (red.postscale_factor != 1.0) result = ScaleInt<T>(result, red.postscale_factor);
    std::memcpy(out.data() + i * sizeof(T), &result, sizeof(T));
  }
}

template <typename F>
auto DispatchInt(DataType t, F&& f) {
  switch (t) {
    case DataType::kUInt8:
      return f(uint8_t{});
    case DataType::kInt8:
      return f(int8_t{});
    case DataType::kInt16:
      return f(int16_t{});
    case DataType::kInt32:
      return f(int32_t{});
    default:
      return f(int64_t{});
  }
}

}  // namespace

double UnitRoundoff(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return std::ldexp(1.0, -11);
    case DataType::kBFloat16:
      return std::ldexp(1.0, -8);
    case DataType::kFloat32:
      return std::ldexp(1.0, -24);
    default:
      return std::ldexp(1.0, -53);
  }
}

double ElementAsDouble(DataType dtype, const void* data, size_t i) {
  switch (dtype) {
    case DataType::kUInt8:
      return static_cast<const uint8_t*>(data)[i];
    case DataType::kInt8:
      return static_cast<const int8_t*>(data)[i];
    case DataType::kInt16:
      return static_cast<const int16_t*>(data)[i];
    case DataType::kInt32:
      return static_cast<const int32_t*>(data)[i];
    case DataType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case DataType::kBool:
      return static_cast<const uint8_t*>(data)[i];
    case DataType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, static_cast<const uint16_t*>(data) + i, 2);
      return kernels::Float16ToFloat(h);
    }
    case DataType::kBFloat16: {
      uint16_t h;
      std::memcpy(&h, static_cast<const uint16_t*>(data) + i, 2);
      return kernels::BFloat16ToFloat(h);
    }
    case DataType::kFloat32:
      return static_cast<const float*>(data)[i];
    case DataType::kFloat64:
      return static_cast<const double*>(data)[i];
  }
  return 0;
}

void FillInput(DataType dtype, ReduceOp op, void* data, size_t count, uint64_t seed, int rank) {
  if (dtype == DataType::kBool) {
    auto* b = static_cast<uint8_t*>(data);
    for (size_t i = 0; i < count; ++i) {
      uint64_t h = Mix(seed ^ Mix(static_cast<uint64_t>(rank) * 1000003u + i));
      b[i] = static_cast<uint8_t>(h % 4 == 0 ? 0 : (h % 4 == 1 ? 2 : 1));  // 2 counts as true
    }
    return;
  }
  if (IsFloatingPoint(dtype)) {
    for (size_t i = 0; i < count; ++i) {
      uint64_t h = Mix(seed ^ Mix(static_cast<uint64_t>(rank) * 1000003u + i));
      double v = static_cast<double>(static_cast<int64_t>(h % 2001) - 1000) / 1000.0;  // [-1, 1]
      if (op == ReduceOp::kProduct) v = 1.0 + v / 2.0;                                 // [0.5, 1.5]
      StoreFloat(dtype, data, i, v);
    }
    return;
  }
  DispatchInt(dtype, [&](auto tag) {
    using T = decltype(tag);
    FillInt<T>(op, static_cast<T*>(data), count, seed, rank);
    return 0;
  });
}

Expected ReferenceAllreduce(DataType dtype, const Reduction& red,
                            const std::vector<const void*>& inputs, size_t count) {
  Expected e{dtype, {}, {}, {}};
  const size_t n = inputs.size();
  if (dtype == DataType::kBool) {
    e.exact.resize(count);
    const bool is_or = red.op == ReduceOp::kSum || red.op == ReduceOp::kMax;
    for (size_t i = 0; i < count; ++i) {
      bool acc = !is_or;
      for (size_t r = 0; r < n; ++r) {
        bool x = static_cast<const uint8_t*>(inputs[r])[i] != 0;
        acc = is_or ? (acc || x) : (acc && x);
      }
      e.exact[i] = acc ? 1 : 0;
    }
    return e;
  }
  if (!IsFloatingPoint(dtype)) {
    DispatchInt(dtype, [&](auto tag) {
      ReferenceInt<decltype(tag)>(red, inputs, count, e.exact);
      return 0;
    });
    return e;
  }
  const double u = UnitRoundoff(dtype);
  const bool narrow = dtype != DataType::kFloat64;
  e.value.resize(count);
  e.tolerance.resize(count);
  for (size_t i = 0; i < count; ++i) {
    double acc = 0, abs_sum = 0;
    for (size_t r = 0; r < n; ++r) {
      double x = ElementAsDouble(dtype, inputs[r], i);
      if (red.prescale_factor != 1.0) {
        // The kernel multiplies in float32 (float64 for f64) and stores.
        x = narrow ? RoundTo(dtype, static_cast<float>(x) * static_cast<float>(red.prescale_factor))
                   : x * red.prescale_factor;
      }
      abs_sum += std::fabs(x);
      switch (red.op) {
        case ReduceOp::kSum:
        case ReduceOp::kAverage:
          acc += x;
          break;
        case ReduceOp::kProduct:
          acc = r == 0 ? x : acc * x;
          break;
        case ReduceOp::kMin:
          acc = r == 0 ? x : std::min(acc, x);
          break;
        case ReduceOp::kMax:
          acc = r == 0 ? x : std::max(acc, x);
          break;
        case ReduceOp::kAdasum:  // not element-wise: allreduce_adasum_test.cc
          std::abort();
      }
    }
    double scale = red.postscale_factor;
    if (red.op == ReduceOp::kAverage) scale /= static_cast<double>(n);
    const double result = acc * scale;
    double tol = 0;
    const double nn = static_cast<double>(n + 2);
    switch (red.op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        tol = nn * u * abs_sum * std::fabs(scale);
        break;
      case ReduceOp::kProduct:
        tol = nn * u * std::fabs(result);
        break;
      case ReduceOp::kMin:
      case ReduceOp::kMax:
        tol = scale == 1.0 ? 0.0 : 2 * u * std::fabs(result);
        break;
      case ReduceOp::kAdasum:
        std::abort();
    }
    e.value[i] = result;
    // Results in the subnormal range of f16 carry an absolute error too.
    e.tolerance[i] = tol + (dtype == DataType::kFloat16 ? 1e-7 : 0.0);
  }
  return e;
}

std::string Compare(const Expected& e, const void* got, size_t offset, size_t count) {
  size_t wrong = 0;
  std::ostringstream first;
  const size_t esize = DataTypeSize(e.dtype);
  const bool exact = !e.exact.empty() || !IsFloatingPoint(e.dtype);
  if (exact &&
      (count == 0 || std::memcmp(got, e.exact.data() + offset * esize, count * esize) == 0)) {
    return "";  // fast path; the loop below only describes what differs
  }
  for (size_t i = 0; i < count; ++i) {
    const size_t k = offset + i;
    bool ok;
    double g = ElementAsDouble(e.dtype, got, i);
    double want, tol = 0;
    if (exact) {
      ok = std::memcmp(static_cast<const uint8_t*>(got) + i * esize, e.exact.data() + k * esize,
                       esize) == 0;
      want = ElementAsDouble(e.dtype, e.exact.data(), k);
    } else {
      want = e.value[k];
      tol = e.tolerance[k];
      ok = std::fabs(g - want) <= tol;
    }
    if (!ok && ++wrong <= 3) {
      first << " [" << k << "] got " << g << " expected " << want << " (tol " << tol << ");";
    }
  }
  if (wrong == 0) return "";
  return std::to_string(wrong) + " wrong of " + std::to_string(count) + "; first:" + first.str();
}

std::vector<uint8_t> BytePattern(size_t bytes, int rank, uint64_t salt) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i)
    v[i] = static_cast<uint8_t>((i * 131 + static_cast<size_t>(rank) * 17 + salt) & 0xff);
  return v;
}

void MakeAlltoallInputs(int n, const std::function<int64_t(int, int)>& rows, size_t row_bytes,
                        uint64_t salt, std::vector<std::vector<uint8_t>>* inputs,
                        std::vector<std::vector<int64_t>>* splits) {
  inputs->assign(static_cast<size_t>(n), {});
  splits->assign(static_cast<size_t>(n), {});
  for (int r = 0; r < n; ++r) {
    int64_t total = 0;
    for (int p = 0; p < n; ++p) {
      (*splits)[static_cast<size_t>(r)].push_back(rows(r, p));
      total += rows(r, p);
    }
    (*inputs)[static_cast<size_t>(r)] =
        BytePattern(static_cast<size_t>(total) * row_bytes, r, salt);
  }
}

std::vector<uint8_t> AlltoallExpected(int n, const std::function<int64_t(int, int)>& rows,
                                      size_t row_bytes,
                                      const std::vector<std::vector<uint8_t>>& inputs, int r) {
  std::vector<uint8_t> expected;
  for (int p = 0; p < n; ++p) {
    size_t offset = 0;
    for (int q = 0; q < r; ++q) offset += static_cast<size_t>(rows(p, q)) * row_bytes;
    const auto first = inputs[static_cast<size_t>(p)].begin() + static_cast<ptrdiff_t>(offset);
    expected.insert(expected.end(), first,
                    first + static_cast<ptrdiff_t>(static_cast<size_t>(rows(p, r)) * row_bytes));
  }
  return expected;
}

bool SameBytes(const void* a, const void* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n) == 0;
}

std::string CompareFilledAllreduce(int n, DataType dtype, const Reduction& reduction, uint64_t seed,
                                   const void* got, size_t count) {
  std::vector<std::vector<uint8_t>> in(static_cast<size_t>(n));
  std::vector<const void*> ptrs;
  for (int r = 0; r < n; ++r) {
    in[static_cast<size_t>(r)].resize(count * DataTypeSize(dtype));
    FillInput(dtype, reduction.op, in[static_cast<size_t>(r)].data(), count, seed, r);
    ptrs.push_back(in[static_cast<size_t>(r)].data());
  }
  return Compare(ReferenceAllreduce(dtype, reduction, ptrs, count), got, 0, count);
}

}  // namespace hora::testing
