// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Horovod's environment variables, read for a Horovod user's job: each
// HOROVOD_* setting that has a Hora equivalent is taken as that HORA_*
// setting (unless the HORA_* one is set: it wins), with a line saying so;
// the others are named as ignored. HOROVOD_RANK, HOROVOD_SIZE and the rest
// of the rank layout (which horarun exports for Horovod's scripts) are
// neither.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace hora {

struct HorovodSettings {
  std::map<std::string, std::string> hora;  // HORA_* name -> value, to layer under the HORA_* env
  std::vector<std::string> notices;         // "HOROVOD_CYCLE_TIME=5 is taken as HORA_CYCLE_TIME_MS"
};

// From `env` (any variables: those named HOROVOD_* are read); `hora` holds
// the HORA_* settings already given (a HOROVOD_* alias of one is ignored,
// with a notice).
HorovodSettings ReadHorovodSettings(const std::map<std::string, std::string>& env,
                                    const std::map<std::string, std::string>& hora);

}  // namespace hora
