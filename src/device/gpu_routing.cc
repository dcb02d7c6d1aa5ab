// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "device/gpu_routing.h"

#include <string>

#include "device/device_staging.h"

namespace hora {

Result<GpuRouting> GpuRouting::FromConfig(const Config& config) {
  GpuRouting r;
  r.nccl = config.gpu_backend == "nccl"   ? NcclMode::kNccl
           : config.gpu_backend == "hora" ? NcclMode::kHora
                                          : NcclMode::kAuto;
  r.nccl_min_bytes = config.nccl_min_bytes;
  r.staging_chunk = config.staging_chunk_bytes;
  HORA_ASSIGN_OR_RETURN(r.first,
                        ParseNamedRanges(
                            "HORA_GPU_ROUTE", config.gpu_route, "route",
                            [](std::string_view name) { return DeviceStaging::IsRoute(name); },
                            DeviceStaging::RouteNames()));
  return r;
}

}  // namespace hora
