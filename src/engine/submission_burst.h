// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/clock.h"

namespace hora {

// Waits, yielding, while a burst of submissions goes on (a model's layers
// one after another: `submissions` counts them), so that one cycle takes
// the whole burst: until 5 us pass with no new one, a thread starts driving
// (`drivers` > 0: it will take the burst), or `at_most` has passed.
void WaitOutSubmissionBurst(const std::atomic<uint64_t>& submissions,
                            const std::atomic<int>& drivers, Duration at_most);

}  // namespace hora
