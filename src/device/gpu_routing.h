// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Which way GPU tensors' collectives go, by the Session's settings: who may
// run them (HORA_GPU_BACKEND, HORA_NCCL_MIN_BYTES), the route a batch tries
// first by its size (HORA_GPU_ROUTE: a row of device_routes.cc) and the
// chunks of what is staged through host memory (HORA_STAGING_CHUNK_BYTES).
// Every rank gives these alike: they are agreed settings, compared when the
// Session is made (common/config.h, AgreedSettings), so no request carries
// them and every rank routes a batch alike from its own.
#pragma once

#include <cstdint>
#include <vector>

#include "common/config.h"
#include "common/size_ranges.h"
#include "hora/status.h"

namespace hora {

enum class NcclMode : uint8_t {
  kHora,  // never NCCL
  kAuto,  // NCCL for batches of nccl_min_bytes or more, where it can be used
  kNccl,  // NCCL for every batch it takes, and an error where it cannot be used
};

struct GpuRouting {
  NcclMode nccl = NcclMode::kAuto;
  uint64_t nccl_min_bytes = 0;
  uint64_t staging_chunk = 0;     // 0: each batch whole
  std::vector<NamedRange> first;  // HORA_GPU_ROUTE's ranges, each naming a route

  // The settings of `config`; an error naming HORA_GPU_ROUTE where it names
  // no route or is malformed.
  static Result<GpuRouting> FromConfig(const Config& config);
};

}  // namespace hora
