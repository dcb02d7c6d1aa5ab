// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Reduce and Reduce3 (reduce.h): dispatch on instruction-set variant, dtype
// and op to the loops of elementwise.h.
//
// Paths, in order of the checks in Reduce3Typed:
//  - a buffer not aligned to its element size: staged through aligned stack
//    chunks with memcpy (rare; correct for any address);
//  - float16 on x86-64-v3/v4: chunks converted to float32 with F16C;
//  - dst equal to an input: the in-place loops;
//  - a large distinct dst on x86-64-v3/v4: computed in small cached chunks
//    and written with streaming stores;
//  - otherwise the three-pointer loop.
#include <cassert>
#include <cstring>
#include <type_traits>

#include "kernels/elementwise.h"
#include "kernels/isa.h"
#include "kernels/reduce.h"
#include "kernels/x86_simd.h"

namespace hora::kernels {
namespace internal {
namespace {

// Outputs at least this large that alias no input are written with streaming
// stores by the x86-64-v3/v4 variants. That skips reading dst into the cache
// before overwriting it (a quarter of the memory traffic of dst = a + b) and
// leaves the inputs in cache; smaller outputs are more likely to be read
// again soon and stay cached. See docs/dev/performance.md.
constexpr size_t kStreamMinBytes = size_t{1} << 20;
// Output computed into cache, then streamed, per step: one block (kBlock).
// Small steps measured fastest: 256 B matched a hand-written streaming loop
// of intrinsics, 2 KiB lost about 15% and 4 KiB about half.
constexpr size_t kStreamChunkBytes = 256;

template <class Codec, class Op>
void BouncedReduce3(void* dst, const void* a, const void* b, size_t n) {
  using S = typename Codec::Storage;
  alignas(64) S x[kChunk];
  alignas(64) S y[kChunk];
  for (size_t i = 0; i < n; i += kChunk) {
    size_t m = n - i < kChunk ? n - i : kChunk;
    size_t offset = i * sizeof(S);
    std::memcpy(x, static_cast<const char*>(a) + offset, m * sizeof(S));
    std::memcpy(y, static_cast<const char*>(b) + offset, m * sizeof(S));
    BinaryInPlace<Codec, Op, false>(x, y, m);
    std::memcpy(static_cast<char*>(dst) + offset, x, m * sizeof(S));
  }
}

// Elements of S before p reaches a kStreamAlign boundary (p is S-aligned).
template <class S>
HORA_KERNEL_INLINE size_t ElementsToStreamAlign(const S* p) {
  return (kStreamAlign - reinterpret_cast<uintptr_t>(p) % kStreamAlign) % kStreamAlign / sizeof(S);
}

// float16 with F16C: m <= kChunk elements converted to float32, reduced,
// converted back. Reads all of a and b before writing dst, so exact aliasing
// is fine.
template <Isa kIsa, class Op>
HORA_KERNEL_INLINE void Float16Chunk(uint16_t* dst, const uint16_t* a, const uint16_t* b,
                                     size_t m) {
  alignas(64) float x[kChunk];
  alignas(64) float y[kChunk];
  F16ToF32<kIsa>(x, a, m);
  F16ToF32<kIsa>(y, b, m);
  BinaryInPlace<NativeCodec<float>, Op, false>(x, y, m);
  F32ToF16<kIsa>(dst, x, m);
}

template <Isa kIsa, class Op>
HORA_KERNEL_INLINE void Float16Reduce3(uint16_t* dst, const uint16_t* a, const uint16_t* b,
                                       size_t n) {
  size_t i = 0;
  const bool stream = dst != a && dst != b && n * sizeof(uint16_t) >= kStreamMinBytes;
  if (stream) {
    i = ElementsToStreamAlign(dst);
    Float16Chunk<kIsa, Op>(dst, a, b, i);
    alignas(kStreamAlign) uint16_t staged[kChunk];
    for (; i + kChunk <= n; i += kChunk) {
      Float16Chunk<kIsa, Op>(staged, a + i, b + i, kChunk);
      StreamCopy<kIsa>(dst + i, staged, sizeof staged);
    }
  }
  for (; i < n; i += kChunk)
    Float16Chunk<kIsa, Op>(dst + i, a + i, b + i, n - i < kChunk ? n - i : kChunk);
  if (stream) StoreFence();
}

template <Isa kIsa, class Codec, class Op, class S = typename Codec::Storage>
HORA_KERNEL_INLINE void StreamedReduce3(S* __restrict dst, const S* __restrict a,
                                        const S* __restrict b, size_t n) {
  constexpr size_t kStep = kStreamChunkBytes / sizeof(S);
  // Plain stores up to the first kStreamAlign boundary of dst (n is large).
  size_t head = ElementsToStreamAlign(dst);
  Binary3<Codec, Op>(dst, a, b, head);
  alignas(kStreamAlign) S staged[kStep];
  size_t i = head;
  for (; i + kStep <= n; i += kStep) {
    Binary3<Codec, Op>(staged, a + i, b + i, kStep);
    StreamCopy<kIsa>(dst + i, staged, sizeof staged);
  }
  Binary3<Codec, Op>(dst + i, a + i, b + i, n - i);
  StoreFence();
}

template <Isa kIsa, class Codec, class Op>
HORA_KERNEL_INLINE void Reduce3Typed(void* dst_v, const void* a_v, const void* b_v, size_t n) {
  using S = typename Codec::Storage;
  assert(!PartiallyOverlap(dst_v, a_v, n * sizeof(S)) && "Reduce3: dst partially overlaps a");
  assert(!PartiallyOverlap(dst_v, b_v, n * sizeof(S)) && "Reduce3: dst partially overlaps b");
  if (!IsAligned<S>(dst_v) || !IsAligned<S>(a_v) || !IsAligned<S>(b_v)) {
    BouncedReduce3<Codec, Op>(dst_v, a_v, b_v, n);
    return;
  }
  auto* dst = static_cast<S*>(dst_v);
  const auto* a = static_cast<const S*>(a_v);
  const auto* b = static_cast<const S*>(b_v);
  if constexpr (kIsa != Isa::kBaseline && std::is_same_v<Codec, Float16Codec>) {
    Float16Reduce3<kIsa, Op>(dst, a, b, n);
  } else if (dst == a) {
    if (dst == b) {
      BinarySelf<Codec, Op>(dst, n);
    } else {
      BinaryInPlace<Codec, Op, false>(dst, b, n);
    }
  } else if (dst == b) {
    BinaryInPlace<Codec, Op, true>(dst, a, n);
  } else {
    if constexpr (kIsa != Isa::kBaseline) {
      if (n * sizeof(S) >= kStreamMinBytes) {
        StreamedReduce3<kIsa, Codec, Op>(dst, a, b, n);
        return;
      }
    }
    Binary3<Codec, Op>(dst, a, b, n);
  }
}

template <Isa kIsa, class Codec>
HORA_KERNEL_INLINE void Reduce3Op(ReduceOp op, void* dst, const void* a, const void* b, size_t n) {
  switch (op) {
    case ReduceOp::kSum:
      return Reduce3Typed<kIsa, Codec, SumOp>(dst, a, b, n);
    case ReduceOp::kMin:
      return Reduce3Typed<kIsa, Codec, MinOp>(dst, a, b, n);
    case ReduceOp::kMax:
      return Reduce3Typed<kIsa, Codec, MaxOp>(dst, a, b, n);
    case ReduceOp::kProduct:
      return Reduce3Typed<kIsa, Codec, ProductOp>(dst, a, b, n);
    case ReduceOp::kAverage:
    case ReduceOp::kAdasum:
      break;
  }
  assert(false && "Reduce: kAverage reduces as kSum; kAdasum is not element-wise (adasum.h)");
}

template <Isa kIsa>
HORA_KERNEL_INLINE void Reduce3Body(DataType dtype, ReduceOp op, void* dst, const void* a,
                                    const void* b, size_t n) {
  switch (dtype) {
    case DataType::kUInt8:
      return Reduce3Op<kIsa, NativeCodec<uint8_t>>(op, dst, a, b, n);
    case DataType::kInt8:
      return Reduce3Op<kIsa, NativeCodec<int8_t>>(op, dst, a, b, n);
    case DataType::kInt16:
      return Reduce3Op<kIsa, NativeCodec<int16_t>>(op, dst, a, b, n);
    case DataType::kInt32:
      return Reduce3Op<kIsa, NativeCodec<int32_t>>(op, dst, a, b, n);
    case DataType::kInt64:
      return Reduce3Op<kIsa, NativeCodec<int64_t>>(op, dst, a, b, n);
    case DataType::kFloat16:
      return Reduce3Op<kIsa, Float16Codec>(op, dst, a, b, n);
    case DataType::kBFloat16:
      return Reduce3Op<kIsa, BFloat16Codec>(op, dst, a, b, n);
    case DataType::kFloat32:
      return Reduce3Op<kIsa, NativeCodec<float>>(op, dst, a, b, n);
    case DataType::kFloat64:
      return Reduce3Op<kIsa, NativeCodec<double>>(op, dst, a, b, n);
    case DataType::kBool:
      return Reduce3Op<kIsa, BoolCodec>(op, dst, a, b, n);
  }
  assert(false && "Reduce: unknown DataType");
}

void Reduce3Baseline(DataType dtype, ReduceOp op, void* dst, const void* a, const void* b,
                     size_t n) {
  Reduce3Body<Isa::kBaseline>(dtype, op, dst, a, b, n);
}

HORA_TARGET_X86V3 void Reduce3X86V3(DataType dtype, ReduceOp op, void* dst, const void* a,
                                    const void* b, size_t n) {
  Reduce3Body<Isa::kX86V3>(dtype, op, dst, a, b, n);
}

HORA_TARGET_X86V4 void Reduce3X86V4(DataType dtype, ReduceOp op, void* dst, const void* a,
                                    const void* b, size_t n) {
  Reduce3Body<Isa::kX86V4>(dtype, op, dst, a, b, n);
}

}  // namespace

void Reduce3With(Isa isa, DataType dtype, ReduceOp op, void* dst, const void* a, const void* b,
                 size_t count) {
  assert(IsaSupported(isa));
  assert(count == 0 || (dst != nullptr && a != nullptr && b != nullptr));
  if (count == 0) return;
  if (isa == Isa::kX86V4) {
    Reduce3X86V4(dtype, op, dst, a, b, count);
  } else if (isa == Isa::kX86V3) {
    Reduce3X86V3(dtype, op, dst, a, b, count);
  } else {
    Reduce3Baseline(dtype, op, dst, a, b, count);
  }
}

void ReduceWith(Isa isa, DataType dtype, ReduceOp op, void* dst, const void* src, size_t count) {
  Reduce3With(isa, dtype, op, dst, dst, src, count);
}

}  // namespace internal

void Reduce(DataType dtype, ReduceOp op, void* dst, const void* src, size_t count) {
  internal::Reduce3With(internal::BestIsa(), dtype, op, dst, dst, src, count);
}

void Reduce3(DataType dtype, ReduceOp op, void* dst, const void* a, const void* b, size_t count) {
  internal::Reduce3With(internal::BestIsa(), dtype, op, dst, a, b, count);
}

}  // namespace hora::kernels
