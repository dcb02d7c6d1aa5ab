// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include <cuda_runtime_api.h>

#include "hora/build_info.h"

#ifndef HORA_CUDA_ARCHITECTURES
#error "the build defines HORA_CUDA_ARCHITECTURES (CMakeLists.txt)"
#endif

namespace hora {

bool CudaBuilt() { return true; }

std::string CudaBuildText() {
  return "CUDA " + std::to_string(CUDART_VERSION / 1000) + "." +
         std::to_string(CUDART_VERSION % 1000 / 10) + ", kernels for " HORA_CUDA_ARCHITECTURES;
}

}  // namespace hora
