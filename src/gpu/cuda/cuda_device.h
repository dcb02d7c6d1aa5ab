// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The Device interface (device.h) on a CUDA GPU, through the CUDA runtime
// (linked statically: a binary that links the driver, -lcuda, does not even
// load on a machine without one). Pointer attributes come from the
// driver's cuPointerGetAttributes, reached through
// cudaGetDriverEntryPointByVersion. Compiled only when the CUDA toolkit is
// found (HORA_WITH_CUDA); run only where a GPU is.
//
// Thread-safe: the runtime is; every call first makes this device current
// on the calling thread.
#pragma once

#include <memory>

#include "gpu/device.h"

namespace hora::gpu {

// Device `ordinal`; UnavailableError, naming why, where there is no usable
// GPU (no driver, a stub driver, no device).
Result<std::unique_ptr<Device>> OpenCudaDevice(int ordinal);

}  // namespace hora::gpu
