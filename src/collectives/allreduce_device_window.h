// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Allreduce of GPU tensors on a DeviceWindow (device_window.h), reduced on
// the GPU -- the shared-memory allreduce (allreduce_shared.h) with device
// memory for host memory and the device's kernels for the CPU's:
//  - the parts (device pointers; a fused batch) are packed, a chunk of half
//    a window at a time, by one batched copy into this rank's window (and
//    prescaled there); the host waits for the device, then steps;
//  - small chunks (16 KiB or less): every rank folds all n windows, in rank
//    order, into its outputs (one step);
//  - larger chunks: rank r folds piece r of every window, in rank order,
//    into its own window and finalizes it; the host waits, steps; every rank
//    copies each piece out of its owner's window with one batched copy.
// Every rank folds every element in rank order, so all get the same bits.
// The copies out are queued, not waited for: the caller records an event
// after them (async completion).
//
// A rank whose device fails (a copy or kernel refused, a wait that times
// out) takes the remaining steps with its failure in its step word: every
// rank then ends the collective at the same step, the failed rank with its
// device's error, the others with an Aborted error naming it -- nobody gets
// results that lack a rank's data without being told.
#pragma once

#include <span>

#include "collectives/algorithms.h"
#include "collectives/comm.h"
#include "collectives/device_window.h"

namespace hora {

// `parts`: device memory of `window`'s device; `comm`: the Comm the window
// was opened on.
Status AllreduceDeviceWindow(Comm& comm, DeviceWindow& window, std::span<const AllreducePart> parts,
                             DataType dtype, const Reduction& reduction);

}  // namespace hora
