// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// horarun --host-discovery-script (elastic mode): the script is run, with
// no arguments, when the job starts and every second after; each line of
// its output names a host that may run workers: "host" (with
// --slots-per-host slots) or "host:slots". Blank lines and lines starting
// with '#' are skipped. A script that fails (a non-zero exit, a line that
// is not a host, or no answer within its timeout) changes nothing: horarun
// says why and keeps the hosts it had.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "hora/status.h"
#include "hosts.h"

namespace hora::horarun {

// The hosts in a script's output, in the order given (a host named twice:
// an error). `slots_per_host`: for "host" lines (0: such a line is an
// error naming the flag).
Result<std::vector<HostSlots>> ParseDiscoveredHosts(const std::string& output, int slots_per_host);

// Runs `script` and returns its standard output; an error names the script
// and says what went wrong (it could not start, its exit status, or no end
// within `timeout`, after which it is killed).
Result<std::string> RunDiscoveryScript(const std::string& script,
                                       std::chrono::milliseconds timeout);

}  // namespace hora::horarun
