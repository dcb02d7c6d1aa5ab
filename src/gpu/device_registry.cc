// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "gpu/device_registry.h"

#include <string>

#include "gpu/cuda/cuda_device.h"
#include "gpu/host/host_device.h"

namespace hora::gpu {

Result<std::unique_ptr<Device>> OpenDevice(std::string_view kind, int ordinal) {
  if (kind == "host") {
    HORA_ASSIGN_OR_RETURN(std::unique_ptr<HostDevice> d, HostDevice::Create(ordinal));
    return std::unique_ptr<Device>(std::move(d));
  }
  if (kind == "cuda") return OpenCudaDevice(ordinal);
  return InvalidArgument("no device kind '" + std::string(kind) + "' (there are: host, cuda)");
}

}  // namespace hora::gpu
