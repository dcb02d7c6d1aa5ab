// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A build without the CUDA toolkit (CMake compiles this file instead of
// gpu/cuda/): no CUDA device, and it says so.
#include "gpu/cuda/cuda_device.h"
#include "hora/build_info.h"

namespace hora {

bool CudaBuilt() { return false; }

std::string CudaBuildText() {
  return "not built: this build of Hora found no CUDA toolkit (HORA_WITH_CUDA=auto; "
         "CUDA_HOME or /usr/local/cuda, then rebuild)";
}

namespace gpu {

Result<std::unique_ptr<Device>> OpenCudaDevice(int) {
  return UnimplementedError("GPU tensors: this build of Hora has no CUDA (" + CudaBuildText() +
                            ")");
}

}  // namespace gpu
}  // namespace hora
