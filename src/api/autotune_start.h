// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The tuner a Session gives its global set's engine on the first rank when
// HORA_AUTOTUNE is on (engine/autotuner.h), with its CSV log opened.
#pragma once

#include <memory>

#include "collectives/comm.h"
#include "common/config.h"
#include "common/logging.h"
#include "engine/autotuner.h"

namespace hora {

// Null where autotuning is off or `data` is not the first rank's. Its space
// follows the job: where Hora's algorithms run (`hora_backend`), algorithm
// cut-offs where `data` has no shared window and hierarchical allreduce
// where the job spans hosts. A log that cannot be opened is reported on
// `logger`, and the tuner runs without one.
std::unique_ptr<Autotuner> StartAutotuner(const Config& config, Comm& data, bool hora_backend,
                                          const Logger& logger);

}  // namespace hora
