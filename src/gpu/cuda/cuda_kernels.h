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
// Every element of `data` set to the `element_bytes` bytes at `value`.
cudaError_t LaunchFill(void* data, const void* value, size_t element_bytes, size_t count,
                       int multiprocessors, cudaStream_t stream);
// The parts (n <= kMaxCopyParts) copied, one launch.
cudaError_t LaunchBatchedCopy(const CopyPart* parts, int n, int multiprocessors,
                              cudaStream_t stream);

}  // namespace hora::gpu::cuda
