// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Whether a rank's process group still has processes to stop.
#pragma once

#include <sys/types.h>

namespace hora::horarun {

// True while process group `pgid` has a member that is not a zombie. A
// zombie stays in its group until its parent reaps it, and where PID 1
// does not reap orphans (some container and VM inits) it never leaves:
// kill(-pgid, 0) alone would see such a group as live forever. Reads /proc
// without allocating (async-signal-safe: the watcher calls it in a forked
// child); without /proc, falls back to kill(-pgid, 0).
bool GroupHasLiveMember(pid_t pgid);

// True when a member of process group `pgid` is stopped (SIGSTOP, a
// tracer's stop): a rank that cannot run until someone continues it. Reads
// /proc (false without it); allocation-free.
bool GroupHasStoppedMember(pid_t pgid);

// Asks process group `pgid` to end: SIGTERM, then SIGCONT, so that a member
// stopped with SIGSTOP (a frozen rank) acts on it too instead of waiting for
// the SIGKILL. Async-signal-safe.
void TerminateGroup(pid_t pgid);

}  // namespace hora::horarun
