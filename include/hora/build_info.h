// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// What this build of Hora has (horarun --check-build and --print-config,
// hora.cuda_built()).
#pragma once

#include <string>

namespace hora {

// True when Hora was built with the CUDA toolkit (HORA_WITH_CUDA=auto found
// it, or =on): it has its GPU kernels and device, whether or not this
// machine has a GPU.
bool CudaBuilt();

// "CUDA 13.0, kernels for sm_80, sm_90", or why there is no CUDA in this build.
std::string CudaBuildText();

// NCCL_VERSION_CODE of the nccl.h this build was compiled against (2.28.9:
// 22809) where it has NCCL's side of the backend (libnccl.so.2, loaded at
// run time where it is found), else 0. Horovod's nccl_built().
int NcclBuiltVersion();

}  // namespace hora
