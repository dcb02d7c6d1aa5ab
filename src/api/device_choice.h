// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The composition root's choice of what runs GPU tensors, by the Session's
// settings: the device of cuda:N tensors (HORA_DEVICE: a CUDA device, or
// the host device, a test double that keeps a GPU's rules on CPU memory)
// and the NCCL each device backend loads (HORA_NCCL_LIBRARY: the library,
// or the host device's double). Nothing below api/ picks a double by
// name: the layers get what was chosen here (docs/dev/gpu.md, "The device
// seam").
#pragma once

#include <string_view>

#include "backends/nccl/nccl.h"
#include "common/config.h"
#include "gpu/lazy_device.h"

namespace hora {

// How the device of HORA_DEVICE=`kind` opens ("host": the host device;
// anything else: CUDA's).
gpu::LazyDevice::Opener ChooseDevice(std::string_view kind);

// The NCCL of HORA_NCCL_LIBRARY=`library` ("host" or "host:SPEC": the host
// device's double; else the library at that path, "" for libnccl.so.2).
NcclSource ChooseNccl(const std::string& library);

}  // namespace hora
