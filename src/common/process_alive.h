// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Whether a process of this host still runs: it exists and has not ended
// (a zombie, ended but not yet reaped by its parent, counts as ended: an
// orphan's zombie may wait for a lazy init process). A process of another
// pid namespace is not seen.
#pragma once

namespace hora {

bool ProcessRuns(int pid);

}  // namespace hora
