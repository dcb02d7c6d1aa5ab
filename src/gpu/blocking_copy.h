// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Host bytes into device memory and back, waited for: through a pinned
// buffer, on a stream of their own, each bounded by `timeout`. For setup,
// tools and tests -- the data path queues its copies on its own stream
// instead (device/device_staging.h).
#pragma once

#include <cstddef>

#include "common/clock.h"
#include "gpu/device.h"

namespace hora::gpu {

Status CopyHostToDevice(Device& device, void* dst, const void* src, size_t bytes, Duration timeout);
Status CopyDeviceToHost(Device& device, void* dst, const void* src, size_t bytes, Duration timeout);
// Device memory to device memory, on `stream` (in its order), waited for.
Status CopyWithinDevice(Device& device, Stream stream, void* dst, const void* src, size_t bytes,
                        Duration timeout);

}  // namespace hora::gpu
