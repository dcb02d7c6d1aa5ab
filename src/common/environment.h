// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The process environment as a map: what Session::Create and horarun read
// their settings and the launchers' variables from.
#pragma once

#include <map>
#include <string>

namespace hora {

// Every variable of this process's environment.
std::map<std::string, std::string> ReadWholeEnvironment();

}  // namespace hora
