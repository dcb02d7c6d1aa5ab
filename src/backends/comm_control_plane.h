// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The control plane Hora runs on: Hora's collectives over a Comm of its own
// (a tag context apart from the data), the AND by collectives/bitwise_and.h,
// and the carried allreduce offered by the data's backend
// (CollectiveBackend::AndCarrying).
#pragma once

#include <memory>

#include "backends/backend.h"
#include "backends/control_plane.h"
#include "collectives/comm.h"

namespace hora {

// `control` and `data` must outlive the control plane and be used by
// nothing else while it runs a call.
std::unique_ptr<ControlPlane> CreateCommControlPlane(Comm& control, CollectiveBackend& data);

}  // namespace hora
