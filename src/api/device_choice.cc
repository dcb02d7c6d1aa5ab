// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// libhora.so's composition (backends/device_choice.h): a CUDA device and
// the NCCL library, and no test double.
#include "backends/device_choice.h"

#include "gpu/cuda/cuda_device.h"

namespace hora {

gpu::LazyDevice::Opener ChooseDevice(std::string_view kind) {
  if (kind == "host") {
    return [](int) -> Result<std::unique_ptr<gpu::Device>> {
      return UnavailableError(
          "the host device is a test double, which this build (libhora.so) leaves out; Hora's "
          "Python module and tools have it");
    };
  }
  return [](int ordinal) { return gpu::OpenCudaDevice(ordinal); };
}

NcclSource ChooseNccl(const std::string& library) {
  if (IsHostNccl(library)) {
    return {true, []() -> Result<std::unique_ptr<NcclLibrary>> {
              return UnavailableError(
                  "the host device's NCCL is a test double, which this build (libhora.so) "
                  "leaves out");
            }};
  }
  return {false, [library] { return OpenNcclLibrary(library); }};
}

}  // namespace hora
