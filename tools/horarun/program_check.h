// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Before any rank starts, horarun checks that the command's program can be
// started on this host, as execvp would look for it, so that a typo or a
// script without its execute bit is one clear error rather than a failure
// in every rank:
//   - a name without '/' is looked for on PATH; one found only in the
//     current directory is named with the fix (./NAME);
//   - a file without execute permission: "ar.py is not executable; run it
//     with python3 ar.py, or chmod +x ar.py";
//   - nothing of that name: "was not found".
#pragma once

#include <string>

#include "hora/status.h"

namespace hora::horarun {

// `path` is the PATH value to search (":"-separated; an empty entry is the
// current directory, as for execvp).
Status CheckProgram(const std::string& program, const std::string& path);

}  // namespace hora::horarun
