// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The Gloo peers of hora-bench (built when libgloo-dev is installed).
#pragma once

#include <memory>
#include <vector>

#include "impl.h"

namespace hora::bench {

// Connects Gloo's full mesh (every rank calls it) and returns its
// implementations of `collective`: gloo_ring and gloo_hd for allreduce,
// gloo for the others.
Result<std::vector<std::unique_ptr<Impl>>> MakeGlooImpls(const Session& session,
                                                         Collective collective, double timeout_s);

}  // namespace hora::bench
