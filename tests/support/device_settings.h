// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// What the GPU-tensor suites (device_tensors_test.cc,
// device_tensor_errors_test.cc) share: the settings of each path GPU
// tensors take, and a float check read back from the device.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hora/session.h"
#include "support/thread_ranks.h"

namespace hora::testing {

inline constexpr auto kForever = std::chrono::nanoseconds::max();

// The host device, or what HORATEST_DEVICE names ("cuda" on a GPU machine:
// scripts/gpu_run.sh runs these suites there too), and the path GPU tensors
// take:
//  - "whole": staged through host memory, each batch whole;
//  - "chunked": staged in chunks of 3000 bytes (no multiple of 8-byte
//    elements);
//  - "window": allreduce on the ranks' device windows (HORA_GPU_IPC,
//    named by HORA_GPU_ROUTE for every size), of 40000 bytes, so that 1031 elements of 8 bytes take
//    one step and larger batches several chunks of two (the rest staged in chunks);
//  - "nccl": every collective through NCCL (HORA_GPU_BACKEND=nccl), where
//    it takes them: the host device's NCCL (HORA_NCCL_LIBRARY=host:queued,
//    whose calls are queued on the rank's stream and wait there for the
//    other ranks, as on a GPU; on a GPU, the library); the other
//    allreduces on the device windows.
Settings DeviceSettings(std::string_view path = "chunked");

// OK when every float32 of `got` is `want`; else an error naming `what`
// and the first element that is not.
Status ExpectFloats(const std::vector<uint8_t>& got, float want, const std::string& what);

// Rank r's `count` floats of r + 1, allreduced (sum) as GPU tensors and
// checked: n(n + 1) / 2 everywhere.
Status AllreduceRankValues(Session& s, int r, size_t count, const std::string& what);

}  // namespace hora::testing
