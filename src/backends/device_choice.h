// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// What runs GPU tensors, as the composition root (api/) chooses by the
// Session's settings: the device of cuda:N tensors (HORA_DEVICE) and the
// NCCL each device backend loads (HORA_NCCL_LIBRARY). Nothing below api/
// picks a device or an NCCL by name: the layers get what was chosen here
// (docs/dev/gpu.md, "The device seam").
//
// Declared here, where api/ and the test doubles (src/doubles/) both reach,
// and defined once per product:
//  - api/device_choice.cc, in libhora.so: a CUDA device and the NCCL
//    library; HORA_DEVICE=host and HORA_NCCL_LIBRARY=host are errors there;
//  - doubles/device_choice_with_doubles.cc, in what Hora builds for itself
//    (its tests, tools, benchmarks and Python module: hora_core): the same,
//    and the host device and its NCCL where the settings ask for them.
#pragma once

#include <string>
#include <string_view>

#include "backends/nccl/nccl.h"
#include "gpu/lazy_device.h"

namespace hora {

// How the device of HORA_DEVICE=`kind` opens ("host": the host device;
// anything else: CUDA's).
gpu::LazyDevice::Opener ChooseDevice(std::string_view kind);

// The NCCL of HORA_NCCL_LIBRARY=`library` ("host" or "host:SPEC": the host
// device's double; else the library at that path, "" for libnccl.so.2).
NcclSource ChooseNccl(const std::string& library);

// Whether `library` names the host device's NCCL.
inline bool IsHostNccl(const std::string& library) {
  return library == "host" || library.starts_with("host:");
}

}  // namespace hora
