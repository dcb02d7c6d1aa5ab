// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// NCCL's semantics on the host device, for ranks that are threads of one
// process or processes of one host (the other side of the seam in nccl.h,
// run in CI): HORA_NCCL_LIBRARY=host with HORA_DEVICE=host.
//
// Its id names a rendezvous object (a Hub) of the process that made it; the
// ranks that init from it meet there: that process's own directly, the
// others' through a Unix socket it serves (host_nccl_remote.h).
// A collective waits on the host for the work queued before it on its
// stream, takes every rank's data through pinned memory, folds it in rank
// order with Hora's CPU kernels, and copies the result back, waited for:
// stricter than NCCL (which only queues), and the same results on every rank.
// A rank whose device failed before its call (its queued work, or the read
// of its inputs) fails the call without meeting the others, as NCCL's
// kernels do not run on a GPU that faulted.
// Sends are posted to the hub and received in order per pair of ranks. A
// group's calls run at its end: its sends, then its collectives in order,
// then its receives.
// Waits are bounded by the communicator's timeout; Abort wakes every rank's
// wait with an error.
// Queued (":queued" below), as on a GPU: a call (or a group, on one stream)
// is queued on its stream of the host device and returns at once; there it
// reads and writes device memory directly and waits for the other ranks, at
// most ten times the timeout; Abort ends only this rank's calls, and
// AsyncError says how this rank's queued calls ended (known in its own
// process: asking costs no call to another; not queued, it says how the
// meeting's calls ended; with ":net" it asks the meeting about the other
// ranks too). (A call queued on a
// device that then faults is skipped, as a kernel on a faulted GPU does not
// run: the others wait for it until they abort.)
#pragma once

#include <memory>
#include <string_view>

#include "backends/nccl/nccl.h"

namespace hora {

// `spec`: what follows "host" in HORA_NCCL_LIBRARY: empty, or any of (in
// any order)
//  - ":refuse-call=N": this library's communicators refuse the Nth call
//    they are asked to make (counted from 1, over all of them), for tests
//    of a rank whose NCCL call fails;
//  - ":queued": calls are queued on their stream (the host device's) and
//    wait there for the other ranks, as NCCL's kernels do, rather than on
//    the host; and an abort ends only this rank's calls, as NCCL's does
//    (the others' wait on until they abort, or ten times the timeout);
//  - ":net": as NCCL across hosts, another rank's end (its abort, or its
//    calls' failure) is reported by this rank's AsyncError, as
//    ncclRemoteError, while this rank's calls wait on.
Result<std::unique_ptr<NcclLibrary>> CreateHostNccl(std::string_view spec = {});

}  // namespace hora
