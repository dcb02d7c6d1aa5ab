// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Who started a rank, so that the rank can see it go (HORA_LAUNCHER, set by
// horarun): "<pid>:<pid namespace>:<boot id>". A rank watches it only when it
// is a process it can see, on its own host and in its own pid namespace.
#pragma once

#include <optional>
#include <string>

namespace hora {

// This process's identity, as HORA_LAUNCHER holds it.
std::string LauncherIdentity();

// The pid of the launcher `identity` names, when this process can see it
// (the same boot of the same host, the same pid namespace); nullopt for
// another host's, another namespace's, or text that is not one.
std::optional<int> LocalLauncherPid(const std::string& identity);

}  // namespace hora
