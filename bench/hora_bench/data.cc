// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "data.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/half.h"

namespace hora::bench {
namespace {

using kernels::BFloat16ToFloat;
using kernels::Float16ToFloat;
using kernels::FloatToBFloat16;
using kernels::FloatToFloat16;

// Small integers, exact in every dtype; products stay powers of two.
double Value(ReduceOp op, int rank, size_t i) {
  if (op == ReduceOp::kProduct) return 1.0 + static_cast<double>((rank + i) % 2);
  return static_cast<double>((rank + 1) * ((i % 7) + 1) % 16);
}

bool IsFloat(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat32 ||
         t == DataType::kFloat64;
}

// Integers wrap modulo 2^bits (C++20 conversions); floats round to the dtype.
void Store(DataType t, uint8_t* base, size_t i, double v) {
  uint8_t* p = base + i * DataTypeSize(t);
  const auto w = static_cast<int64_t>(v);
  switch (t) {
    case DataType::kUInt8:
      *p = static_cast<uint8_t>(w);
      return;
    case DataType::kInt8: {
      const auto x = static_cast<int8_t>(w);
      std::memcpy(p, &x, 1);
      return;
    }
    case DataType::kInt16: {
      const auto x = static_cast<int16_t>(w);
      std::memcpy(p, &x, 2);
      return;
    }
    case DataType::kInt32: {
      const auto x = static_cast<int32_t>(w);
      std::memcpy(p, &x, 4);
      return;
    }
    case DataType::kInt64:
      std::memcpy(p, &w, 8);
      return;
    case DataType::kFloat16: {
      const uint16_t h = FloatToFloat16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      return;
    }
    case DataType::kBFloat16: {
      const uint16_t h = FloatToBFloat16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      return;
    }
    case DataType::kFloat32: {
      const auto f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      return;
    }
    case DataType::kFloat64:
      std::memcpy(p, &v, 8);
      return;
    case DataType::kBool:
      *p = v != 0;
      return;
  }
}

double Load(DataType t, const uint8_t* base, size_t i) {
  uint8_t tmp[8];
  std::memcpy(tmp, base + i * DataTypeSize(t), DataTypeSize(t));
  switch (t) {
    case DataType::kUInt8:
    case DataType::kBool:
      return tmp[0];
    case DataType::kInt8:
      return static_cast<int8_t>(tmp[0]);
    case DataType::kInt16: {
      int16_t x;
      std::memcpy(&x, tmp, 2);
      return x;
    }
    case DataType::kInt32: {
      int32_t x;
      std::memcpy(&x, tmp, 4);
      return x;
    }
    case DataType::kInt64: {
      int64_t x;
      std::memcpy(&x, tmp, 8);
      return static_cast<double>(x);
    }
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      uint16_t h;
      std::memcpy(&h, tmp, 2);
      return t == DataType::kFloat16 ? Float16ToFloat(h) : BFloat16ToFloat(h);
    }
    case DataType::kFloat32: {
      float f;
      std::memcpy(&f, tmp, 4);
      return f;
    }
    case DataType::kFloat64: {
      double d;
      std::memcpy(&d, tmp, 8);
      return d;
    }
  }
  return 0;
}

// The value `v` takes once stored in dtype t.
double InType(DataType t, double v) {
  uint8_t tmp[8];
  Store(t, tmp, 0, v);
  return Load(t, tmp, 0);
}

// Element i of the reduction over every rank, in dtype t.
double Reduced(const Args& a, int ranks, size_t i) {
  const DataType t = a.dtype;
  double acc = Value(a.op, 0, i);
  for (int r = 1; r < ranks; ++r) {
    const double v = Value(a.op, r, i);
    switch (a.op) {
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
      case ReduceOp::kProduct:
        acc *= v;
        break;
      default:
        acc += v;
    }
  }
  if (a.op != ReduceOp::kAverage) return InType(t, acc);
  if (IsFloat(t)) return InType(t, acc / ranks);
  // Integers: the wrapped sum, divided toward zero.
  return std::trunc(InType(t, acc) / ranks);
}

// Tolerance relative to the result: the reduction order of floats may round
// differently from the reference (average divides a rounded sum).
double Tolerance(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return 2e-3;
    case DataType::kBFloat16:
      return 1.6e-2;
    case DataType::kFloat32:
      return 1e-6;
    case DataType::kFloat64:
      return 1e-12;
    default:
      return 0;
  }
}

}  // namespace

Layout MakeLayout(Collective c, DataType t, uint64_t bytes, int ranks) {
  const size_t esize = DataTypeSize(t);
  const auto n = static_cast<size_t>(ranks);
  const size_t elements = std::max<size_t>(1, bytes / esize);
  Layout l;
  switch (c) {
    case Collective::kAllreduce:
    case Collective::kBroadcast:
      l.in_count = l.out_count = elements;
      l.size_bytes = elements * esize;
      l.busbw_factor = c == Collective::kBroadcast ? 1.0 : 2.0 * (ranks - 1) / ranks;
      return l;
    case Collective::kAllgather:
      l.chunk = std::max<size_t>(1, elements / n);
      l.in_count = l.chunk;
      l.out_count = l.chunk * n;
      break;
    case Collective::kReducescatter:
      l.chunk = std::max<size_t>(1, elements / n);
      l.in_count = l.chunk * n;
      l.out_count = l.chunk;
      break;
    case Collective::kAlltoall:
      l.chunk = std::max<size_t>(1, elements / n);
      l.in_count = l.out_count = l.chunk * n;
      break;
  }
  l.size_bytes = l.chunk * n * esize;
  l.busbw_factor = static_cast<double>(ranks - 1) / ranks;
  return l;
}

std::vector<uint8_t> MakeInput(const Args& a, const Layout& l, int rank) {
  std::vector<uint8_t> in(l.in_count * DataTypeSize(a.dtype));
  for (size_t i = 0; i < l.in_count; ++i) Store(a.dtype, in.data(), i, Value(a.op, rank, i));
  return in;
}

long CountWrong(const Args& a, const Layout& l, int rank, int ranks, const uint8_t* out) {
  const double tol = Tolerance(a.dtype);
  const auto r = static_cast<size_t>(rank);
  long wrong = 0;
  for (size_t i = 0; i < l.out_count; ++i) {
    double want = 0;
    switch (a.collective) {
      case Collective::kAllreduce:
        want = Reduced(a, ranks, i);
        break;
      case Collective::kBroadcast:
        want = InType(a.dtype, Value(a.op, a.root, i));
        break;
      case Collective::kAllgather:  // block q is rank q's input
        want = InType(a.dtype, Value(a.op, static_cast<int>(i / l.chunk), i % l.chunk));
        break;
      case Collective::kReducescatter:  // rank r's block of the reduction
        want = Reduced(a, ranks, r * l.chunk + i);
        break;
      case Collective::kAlltoall:  // block q is rank q's block r
        want =
            InType(a.dtype, Value(a.op, static_cast<int>(i / l.chunk), r * l.chunk + i % l.chunk));
        break;
    }
    const double got = Load(a.dtype, out, i);
    wrong += !(std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want)));
  }
  return wrong;
}

}  // namespace hora::bench
