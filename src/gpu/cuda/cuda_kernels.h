// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Launchers of Hora's GPU kernels (cuda_kernels.cu), callable from host C++.
// Every kernel is a grid-stride loop over the CPU's own element functions
// (kernels/elementwise.h, compiled for the device), so results match the
// CPU's bit for bit. Each returns the launch's error (cudaSuccess, or why it
// could not be queued); the work itself runs on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "gpu/device.h"

namespace hora::gpu::cuda {

// Sources one Reduce launch folds; more are folded in further launches.
inline constexpr int kMaxReduceSources = 8;
// Parts one BatchedCopy launch moves (kernel parameters of 6 KiB; fewer
// parts take a smaller block).
inline constexpr int kMaxCopyParts = 256;

// dst[i] = srcs[0][i] op srcs[1][i] op ... (n sources, 1 <= n <=
// kMaxReduceSources), rounded to the storage type after each op.
cudaError_t LaunchReduce(DataType dtype, ReduceOp op, void* dst, const void* const* srcs, int n,
                         size_t count, int multiprocessors, cudaStream_t stream);
// dst[i] = src[i] * factor (kernels/reduce.h's Scale).
cudaError_t LaunchScale(DataType dtype, double factor, void* dst, const void* src, size_t count,
                        int multiprocessors, cudaStream_t stream);
// data[i] /= world_size, toward zero (integer types: average's division).
cudaError_t LaunchDivideInt(DataType dtype, int world_size, void* data, size_t count,
                            int multiprocessors, cudaStream_t stream);
// The copy kernel's launches through the driver (cuLaunchKernel), its
// functions looked up once. The runtime's launch (<<<>>>) finds the
// function from its host stub at every call, which a one-rank
// collective's latency pays. Empty: the runtime launches.
struct CopyLauncher {
  void* launch = nullptr;   // cuLaunchKernel
  void* functions[4] = {};  // the kernel for 1, 8, 64 and 256 parts
};
// `launcher` filled for the calling thread's current device. When the
// driver cannot give the functions, it is left empty and the error is
// returned (the launches then go through the runtime).
cudaError_t OpenCopyLauncher(CopyLauncher* launcher);
// The parts (n <= kMaxCopyParts) copied, one launch: through `launcher`
// where it is open, else (or if the driver refuses) through the runtime.
cudaError_t LaunchBatchedCopy(const CopyPart* parts, int n, int multiprocessors,
                              cudaStream_t stream, const CopyLauncher* launcher = nullptr);

}  // namespace hora::gpu::cuda
