// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#pragma once

#include <memory>
#include <string_view>

#include "gpu/device.h"

namespace hora::gpu {

// A device by kind: "host" (the host device, always there) or "cuda" (a
// CUDA build, on a machine with a GPU). An unknown kind names the known.
Result<std::unique_ptr<Device>> OpenDevice(std::string_view kind, int ordinal);

}  // namespace hora::gpu
