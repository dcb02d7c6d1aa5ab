// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A build without the CUDA toolkit (CMake compiles this file instead of
// gpu/cuda/): no CUDA device, and it says so.
#include "gpu/cuda/cuda_device.h"
#include "hora/build_info.h"

#ifndef HORA_WITH_CUDA_SETTING
#error "the build defines HORA_WITH_CUDA_SETTING (CMakeLists.txt)"
#endif

namespace hora {

bool CudaBuilt() { return false; }

std::string CudaBuildText() {
  const std::string setting = HORA_WITH_CUDA_SETTING;
  if (setting == "off") return "not built (HORA_WITH_CUDA=off)";
  return "not built: no CUDA toolkit was found (HORA_WITH_CUDA=" + setting +
         "; set CUDA_HOME and rebuild)";
}

namespace gpu {

Result<std::unique_ptr<Device>> OpenCudaDevice(int) {
  return UnimplementedError("GPU tensors: this build of Hora has no CUDA (" + CudaBuildText() +
                            ")");
}

}  // namespace gpu
}  // namespace hora
