// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// horarun --version and --check-build (horovodrun's -v and -cb): what this
// build of Hora has, from the build's own settings.
#pragma once

#include <string>

namespace hora::horarun {

// "horarun (Hora) 0.1.0\n".
std::string VersionText();

// The first line of --print-config: "# Hora 0.1.0; CUDA: ...".
std::string BuildComment();

// The frameworks, launchers and collective implementations this build has,
// each line "[X] name" or "[ ] name", in horovodrun -cb's layout.
std::string CheckBuildText();

}  // namespace hora::horarun
