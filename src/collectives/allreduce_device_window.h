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
#include "collectives/selector.h"

namespace hora {

// A job spanning hosts, each with as many ranks (docs/dev/gpu.md,
// "Across hosts"): the window's Comm is this host's ranks, and `comm` joins
// the ranks with this rank's place on the other hosts. Whatever a host's
// ranks reduce on their window (a piece each, or the whole of a small
// chunk) goes, before it is finalized, to `pinned` (host memory of half a
// window), is allreduced there across the hosts (an algorithm `selector`
// chooses, over `comm`: the TCP transport), comes back, and is finalized
// for the job's `world` ranks. So PCIe and the network carry a host's
// share once per rank, not the whole message, and the reduction within a
// host stays on its GPUs.
//
// Failures keep every rank in step: a host whose step says one of its
// ranks failed (or whose exchange failed) goes on with its exchanges across
// hosts (on whatever its host memory holds) without touching its GPUs, and
// at the end every rank tells its counterparts on the other hosts whether
// it or its host failed, then its own host's ranks what it was told. Every
// rank then fails, naming a rank that failed (on other hosts, the one their
// counterpart names), or none does. A host step that itself fails (a
// timeout, a rank lost) ends the collective at once: its exchanges' peers
// then fail at their timeout, or when they find the rank lost.
//
// The exchanges go in pieces of `chunk_bytes` (0: whole), pipelined with
// the copies to and from host memory on two events of the window's device.
struct AcrossHosts {
  Comm* comm = nullptr;
  const Selector* selector = nullptr;
  void* pinned = nullptr;
  int world = 0;
  size_t chunk_bytes = 0;
  gpu::Event events[2] = {};
};

// `parts`: device memory of `window`'s device; `comm`: the Comm the window
// was opened on; `across`: where the job spans hosts, else null.
Status AllreduceDeviceWindow(Comm& comm, DeviceWindow& window, std::span<const AllreducePart> parts,
                             DataType dtype, const Reduction& reduction,
                             const AcrossHosts* across = nullptr);

}  // namespace hora
