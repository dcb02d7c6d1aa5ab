// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The environment horarun gives its ranks beyond the HORA_* settings.
// Local ranks inherit horarun's whole environment. Ranks on other hosts get
// it forwarded, as horovodrun does, less the names that belong to this
// host or this shell:
//   - horovodrun's exclusions: BASH_FUNC_*, OLDPWD, *CUDA_VISIBLE_DEVICES,
//     and its secret _HOROVOD_SECRET_KEY;
//   - Hora's job secret HORA_SECRET (it travels on its own, see job.h);
//   - names a shell sets for itself or refuses to be given (PWD, SHLVL, _,
//     PPID, UID, EUID, SHELLOPTS, BASHOPTS, HOSTNAME), and ssh's SSH_*
//     connection variables (SSH_AUTH_SOCK is a path on this host);
//   - names that are not shell variable names (a remote shell cannot
//     export them).
// `-x NAME` gives every rank (local and remote) NAME's value here, also a
// name the list above leaves out; `-x NAME=VALUE` gives it VALUE.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "hora/status.h"

namespace hora::horarun {

// Whether `name` is forwarded to ranks on other hosts.
bool IsForwarded(const std::string& name);

// The part of `env` (horarun's whole environment) that remote ranks get.
std::map<std::string, std::string> ForwardedEnvironment(
    const std::map<std::string, std::string>& env);

// The variables of the -x flags, looked up in `env`. A NAME that `env`
// does not have is an error naming it.
Result<std::map<std::string, std::string>> ExportedVariables(
    const std::vector<std::string>& exports, const std::map<std::string, std::string>& env);

}  // namespace hora::horarun
