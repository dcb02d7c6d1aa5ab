// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The composition with the test doubles (backends/device_choice.h), for
// what Hora builds for itself: its tests, tools, benchmarks and Python
// module.
#include "backends/device_choice.h"

#include <string>

#include "doubles/host_device.h"
#include "doubles/host_nccl.h"
#include "gpu/cuda/cuda_device.h"

namespace hora {

gpu::LazyDevice::Opener ChooseDevice(std::string_view kind) {
  if (kind == "host") {
    return [](int ordinal) -> Result<std::unique_ptr<gpu::Device>> {
      HORA_ASSIGN_OR_RETURN(std::unique_ptr<gpu::HostDevice> d, gpu::HostDevice::Create(ordinal));
      return std::unique_ptr<gpu::Device>(std::move(d));
    };
  }
  return [](int ordinal) { return gpu::OpenCudaDevice(ordinal); };
}

NcclSource ChooseNccl(const std::string& library) {
  if (IsHostNccl(library)) {
    const std::string spec = library.substr(4);
    return {true, [spec] { return CreateHostNccl(spec); }};
  }
  return {false, [library] { return OpenNcclLibrary(library); }};
}

}  // namespace hora
