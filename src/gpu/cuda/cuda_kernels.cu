// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include <cuda.h>

#include <cstdint>
#include <cstring>

#include "gpu/cuda/cuda_kernels.h"
#include "kernels/elementwise.h"

namespace hora::gpu::cuda {
namespace {

namespace ki = hora::kernels::internal;

constexpr int kThreads = 256;

unsigned Blocks(size_t count, int multiprocessors) {
  const size_t want = (count + kThreads - 1) / kThreads;
  const size_t most = static_cast<size_t>(multiprocessors > 0 ? multiprocessors : 1) * 8;
  return static_cast<unsigned>(want < 1 ? 1 : (want < most ? want : most));
}

struct Sources {
  const void* p[kMaxReduceSources];
  int n;
};

// Elements [begin, count) of the reduction, one per thread per step.
template <class Codec, class Op>
__device__ void ReduceElements(void* dst_v, const Sources& src, size_t begin, size_t count) {
  using S = typename Codec::Storage;
  auto* dst = static_cast<S*>(dst_v);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = begin + static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    S acc = static_cast<const S*>(src.p[0])[i];
    for (int k = 1; k < src.n; ++k) {
      const S x = static_cast<const S*>(src.p[k])[i];
      acc = Codec::Store(Op::Apply(Codec::Load(acc), Codec::Load(x)));
    }
    dst[i] = acc;
  }
}

template <class Codec, class Op>
__global__ void ReduceKernel(void* dst_v, Sources src, size_t count) {
  ReduceElements<Codec, Op>(dst_v, src, 0, count);
}

// The same with 16-byte loads and stores (every pointer 16-byte aligned):
// each thread reduces 16 bytes' elements per step, lane by lane, in the same
// order as ReduceElements (so results match bit for bit); the last
// elements, short of a word, one by one.
template <class Codec, class Op>
__global__ void ReduceKernelWide(void* dst_v, Sources src, size_t count) {
  using S = typename Codec::Storage;
  constexpr size_t kLanes = sizeof(uint4) / sizeof(S);
  const size_t words = count / kLanes;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t w = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words;
       w += stride) {
    uint4 word = static_cast<const uint4*>(src.p[0])[w];
    S acc[kLanes];
    memcpy(acc, &word, sizeof word);
    for (int k = 1; k < src.n; ++k) {
      word = static_cast<const uint4*>(src.p[k])[w];
      S x[kLanes];
      memcpy(x, &word, sizeof word);
#pragma unroll
      for (size_t l = 0; l < kLanes; ++l) {
        acc[l] = Codec::Store(Op::Apply(Codec::Load(acc[l]), Codec::Load(x[l])));
      }
    }
    memcpy(&word, acc, sizeof word);
    static_cast<uint4*>(dst_v)[w] = word;
  }
  ReduceElements<Codec, Op>(dst_v, src, words * kLanes, count);
}

template <class Codec, class Op>
void LaunchReduceOf(void* dst, const Sources& src, size_t count, bool wide, int multiprocessors,
                    cudaStream_t stream) {
  using S = typename Codec::Storage;
  if (wide) {
    const size_t words = count / (sizeof(uint4) / sizeof(S));
    ReduceKernelWide<Codec, Op>
        <<<Blocks(words > 0 ? words : 1, multiprocessors), kThreads, 0, stream>>>(dst, src, count);
  } else {
    ReduceKernel<Codec, Op>
        <<<Blocks(count, multiprocessors), kThreads, 0, stream>>>(dst, src, count);
  }
}

template <class Codec>
cudaError_t ReduceFor(ReduceOp op, void* dst, const Sources& src, size_t count, bool wide,
                      int multiprocessors, cudaStream_t stream) {
  switch (op) {
    case ReduceOp::kSum:
      LaunchReduceOf<Codec, ki::SumOp>(dst, src, count, wide, multiprocessors, stream);
      break;
    case ReduceOp::kMin:
      LaunchReduceOf<Codec, ki::MinOp>(dst, src, count, wide, multiprocessors, stream);
      break;
    case ReduceOp::kMax:
      LaunchReduceOf<Codec, ki::MaxOp>(dst, src, count, wide, multiprocessors, stream);
      break;
    case ReduceOp::kProduct:
      LaunchReduceOf<Codec, ki::ProductOp>(dst, src, count, wide, multiprocessors, stream);
      break;
    default:
      return cudaErrorInvalidValue;  // (average is a sum then Finalize; adasum no kernel)
  }
  return cudaGetLastError();
}

template <class T>
__global__ void ScaleIntKernel(T* dst, const T* src, size_t count, double factor, double lo,
                               double hi) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    dst[i] = ki::TruncToIntSaturated<T>(static_cast<double>(src[i]) * factor, lo, hi);
  }
}

// A non-finite factor: NaN products give 0, the others saturate.
template <class T>
__global__ void ScaleIntNonFiniteKernel(T* dst, const T* src, size_t count, double factor, T lo,
                                        T hi) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const double v = static_cast<double>(src[i]) * factor;
    dst[i] = v != v ? T{0} : (v > 0 ? hi : lo);
  }
}

template <class Codec>
__global__ void ScaleFloatKernel(void* dst_v, const void* src_v, size_t count,
                                 typename Codec::Compute factor) {
  using S = typename Codec::Storage;
  auto* dst = static_cast<S*>(dst_v);
  const auto* src = static_cast<const S*>(src_v);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    dst[i] = Codec::Store(Codec::Load(src[i]) * factor);
  }
}

// bool through Scale(1.0): nonzero bytes become 1, as on the CPU.
__global__ void NormalizeBoolKernel(unsigned char* dst, const unsigned char* src, size_t count) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    dst[i] = src[i] != 0 ? 1 : 0;
  }
}

template <class T>
cudaError_t ScaleInt(double factor, void* dst, const void* src, size_t count, unsigned blocks,
                     cudaStream_t stream) {
  constexpr T kLo = std::numeric_limits<T>::min();
  constexpr T kHi = std::numeric_limits<T>::max();
  const bool finite = factor - factor == 0.0;
  if (finite) {
    ScaleIntKernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<T*>(dst),
                                                       static_cast<const T*>(src), count, factor,
                                                       ki::kIntLo<T>, ki::kIntHi<T>);
  } else {
    ScaleIntNonFiniteKernel<T><<<blocks, kThreads, 0, stream>>>(
        static_cast<T*>(dst), static_cast<const T*>(src), count, factor, kLo, kHi);
  }
  return cudaGetLastError();
}

template <class Codec>
cudaError_t ScaleFloat(double factor, void* dst, const void* src, size_t count, unsigned blocks,
                       cudaStream_t stream) {
  using C = typename Codec::Compute;
  ScaleFloatKernel<Codec><<<blocks, kThreads, 0, stream>>>(dst, src, count, static_cast<C>(factor));
  return cudaGetLastError();
}

template <class T>
__global__ void DivideIntKernel(T* data, size_t count, int world_size) {
  using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  const auto divisor = static_cast<Wide>(world_size);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    data[i] = static_cast<T>(static_cast<Wide>(data[i]) / divisor);
  }
}

template <class T>
cudaError_t DivideInt(int world_size, void* data, size_t count, unsigned blocks,
                      cudaStream_t stream) {
  DivideIntKernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<T*>(data), count, world_size);
  return cudaGetLastError();
}

// A launch's parts, in a parameter block only as large as it needs: the
// driver copies the whole block at every launch (6 KiB for 256 parts),
// which a small batch's latency would pay for parts it does not have.
template <int kCapacity>
struct CopyParts {
  CopyPart part[kCapacity];
};

// Block row y copies part y, its threads striding over the part: 16-byte
// words where the part's pointers and size allow, else 4-byte words, else
// bytes.
template <int kCapacity>
__global__ void BatchedCopyKernel(const __grid_constant__ CopyParts<kCapacity> parts) {
  const CopyPart& p = parts.part[blockIdx.y];
  const size_t start = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const auto d = reinterpret_cast<uintptr_t>(p.dst);
  const auto s = reinterpret_cast<uintptr_t>(p.src);
  if (((d | s | p.bytes) & 15) == 0) {
    auto* dst = static_cast<uint4*>(p.dst);
    const auto* src = static_cast<const uint4*>(p.src);
    for (size_t i = start; i < p.bytes / 16; i += stride) dst[i] = src[i];
    return;
  }
  if (((d | s | p.bytes) & 3) == 0) {  // (a packed batch's float32 tensors)
    auto* dst = static_cast<uint32_t*>(p.dst);
    const auto* src = static_cast<const uint32_t*>(p.src);
    for (size_t i = start; i < p.bytes / 4; i += stride) dst[i] = src[i];
    return;
  }
  auto* dst = static_cast<unsigned char*>(p.dst);
  const auto* src = static_cast<const unsigned char*>(p.src);
  for (size_t i = start; i < p.bytes; i += stride) dst[i] = src[i];
}

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);

// The kernel for `kCapacity` parts: its index in CopyLauncher::functions.
template <int kCapacity>
constexpr int CapacityIndex() {
  return kCapacity == 1 ? 0 : kCapacity == 8 ? 1 : kCapacity == 64 ? 2 : 3;
}

template <int kCapacity>
cudaError_t LaunchCopies(const CopyPart* parts, int n, dim3 grid, cudaStream_t stream,
                         const CopyLauncher* launcher) {
  CopyParts<kCapacity> all{};
  for (int i = 0; i < n; ++i) all.part[i] = parts[i];
  if (launcher != nullptr && launcher->launch != nullptr) {
    void* args[] = {&all};
    const auto f = static_cast<CUfunction>(launcher->functions[CapacityIndex<kCapacity>()]);
    const CUresult rc = reinterpret_cast<LaunchFn>(launcher->launch)(
        f, grid.x, grid.y, 1, kThreads, 1, 1, 0, reinterpret_cast<CUstream>(stream), args, nullptr);
    if (rc == CUDA_SUCCESS) return cudaSuccess;
    // (Refused: the runtime's launch below says why, in its own terms.)
  }
  BatchedCopyKernel<kCapacity><<<grid, kThreads, 0, stream>>>(all);
  return cudaGetLastError();
}

template <int kCapacity>
cudaError_t FunctionOf(CopyLauncher* launcher) {
  cudaFunction_t f = nullptr;
  const cudaError_t rc =
      cudaGetFuncBySymbol(&f, reinterpret_cast<const void*>(&BatchedCopyKernel<kCapacity>));
  launcher->functions[CapacityIndex<kCapacity>()] = f;
  return rc;
}

}  // namespace

cudaError_t LaunchReduce(DataType dtype, ReduceOp op, void* dst, const void* const* srcs, int n,
                         size_t count, int multiprocessors, cudaStream_t stream) {
  if (n < 1 || n > kMaxReduceSources) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  Sources src{};
  auto bits = reinterpret_cast<uintptr_t>(dst);
  for (int k = 0; k < n; ++k) {
    src.p[k] = srcs[k];
    bits |= reinterpret_cast<uintptr_t>(srcs[k]);
  }
  src.n = n;
  const bool wide = (bits & 15) == 0;  // 16-byte loads and stores
  const int sms = multiprocessors;
  switch (dtype) {
    case DataType::kUInt8:
      return ReduceFor<ki::NativeCodec<uint8_t>>(op, dst, src, count, wide, sms, stream);
    case DataType::kInt8:
      return ReduceFor<ki::NativeCodec<int8_t>>(op, dst, src, count, wide, sms, stream);
    case DataType::kInt16:
      return ReduceFor<ki::NativeCodec<int16_t>>(op, dst, src, count, wide, sms, stream);
    case DataType::kInt32:
      return ReduceFor<ki::NativeCodec<int32_t>>(op, dst, src, count, wide, sms, stream);
    case DataType::kInt64:
      return ReduceFor<ki::NativeCodec<int64_t>>(op, dst, src, count, wide, sms, stream);
    case DataType::kFloat16:
      return ReduceFor<ki::Float16Codec>(op, dst, src, count, wide, sms, stream);
    case DataType::kBFloat16:
      return ReduceFor<ki::BFloat16Codec>(op, dst, src, count, wide, sms, stream);
    case DataType::kFloat32:
      return ReduceFor<ki::NativeCodec<float>>(op, dst, src, count, wide, sms, stream);
    case DataType::kFloat64:
      return ReduceFor<ki::NativeCodec<double>>(op, dst, src, count, wide, sms, stream);
    case DataType::kBool:
      return ReduceFor<ki::BoolCodec>(op, dst, src, count, wide, sms, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchScale(DataType dtype, double factor, void* dst, const void* src, size_t count,
                        int multiprocessors, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const unsigned blocks = Blocks(count, multiprocessors);
  switch (dtype) {
    case DataType::kUInt8:
      return ScaleInt<uint8_t>(factor, dst, src, count, blocks, stream);
    case DataType::kInt8:
      return ScaleInt<int8_t>(factor, dst, src, count, blocks, stream);
    case DataType::kInt16:
      return ScaleInt<int16_t>(factor, dst, src, count, blocks, stream);
    case DataType::kInt32:
      return ScaleInt<int32_t>(factor, dst, src, count, blocks, stream);
    case DataType::kInt64:
      return ScaleInt<int64_t>(factor, dst, src, count, blocks, stream);
    case DataType::kFloat16:
      return ScaleFloat<ki::Float16Codec>(factor, dst, src, count, blocks, stream);
    case DataType::kBFloat16:
      return ScaleFloat<ki::BFloat16Codec>(factor, dst, src, count, blocks, stream);
    case DataType::kFloat32:
      return ScaleFloat<ki::NativeCodec<float>>(factor, dst, src, count, blocks, stream);
    case DataType::kFloat64:
      return ScaleFloat<ki::NativeCodec<double>>(factor, dst, src, count, blocks, stream);
    case DataType::kBool:
      if (factor != 1.0) return cudaErrorInvalidValue;
      NormalizeBoolKernel<<<blocks, kThreads, 0, stream>>>(
          static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src), count);
      return cudaGetLastError();
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchDivideInt(DataType dtype, int world_size, void* data, size_t count,
                            int multiprocessors, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const unsigned blocks = Blocks(count, multiprocessors);
  switch (dtype) {
    case DataType::kUInt8:
      return DivideInt<uint8_t>(world_size, data, count, blocks, stream);
    case DataType::kInt8:
      return DivideInt<int8_t>(world_size, data, count, blocks, stream);
    case DataType::kInt16:
      return DivideInt<int16_t>(world_size, data, count, blocks, stream);
    case DataType::kInt32:
      return DivideInt<int32_t>(world_size, data, count, blocks, stream);
    case DataType::kInt64:
      return DivideInt<int64_t>(world_size, data, count, blocks, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t OpenCopyLauncher(CopyLauncher* launcher) {
  CopyLauncher l;
  cudaDriverEntryPointQueryResult found{};
  cudaError_t rc = cudaGetDriverEntryPointByVersion("cuLaunchKernel", &l.launch, 12000,
                                                    cudaEnableDefault, &found);
  if (rc == cudaSuccess && (found != cudaDriverEntryPointSuccess || l.launch == nullptr)) {
    rc = cudaErrorSymbolNotFound;
  }
  if (rc == cudaSuccess) rc = FunctionOf<1>(&l);
  if (rc == cudaSuccess) rc = FunctionOf<8>(&l);
  if (rc == cudaSuccess) rc = FunctionOf<64>(&l);
  if (rc == cudaSuccess) rc = FunctionOf<kMaxCopyParts>(&l);
  *launcher = rc == cudaSuccess ? l : CopyLauncher{};
  // (The runtime keeps the error for its next cudaGetLastError, which a
  // launch would then report as its own.)
  if (rc != cudaSuccess) (void)cudaGetLastError();
  return rc;
}

cudaError_t LaunchBatchedCopy(const CopyPart* parts, int n, int multiprocessors,
                              cudaStream_t stream, const CopyLauncher* launcher) {
  if (n < 0 || n > kMaxCopyParts) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  size_t largest = 0;
  for (int i = 0; i < n; ++i) largest = parts[i].bytes > largest ? parts[i].bytes : largest;
  if (largest == 0) return cudaSuccess;
  // Enough blocks per part for its largest (in 16-byte words), spread over
  // the device, at least one.
  const size_t per_part = (largest / 16 + kThreads - 1) / kThreads;
  const size_t most = static_cast<size_t>(multiprocessors > 0 ? multiprocessors : 1) * 8;
  const unsigned x = static_cast<unsigned>(per_part < 1 ? 1 : (per_part < most ? per_part : most));
  const dim3 grid(x, static_cast<unsigned>(n));
  if (n == 1) return LaunchCopies<1>(parts, n, grid, stream, launcher);
  if (n <= 8) return LaunchCopies<8>(parts, n, grid, stream, launcher);
  if (n <= 64) return LaunchCopies<64>(parts, n, grid, stream, launcher);
  return LaunchCopies<kMaxCopyParts>(parts, n, grid, stream, launcher);
}

}  // namespace hora::gpu::cuda
