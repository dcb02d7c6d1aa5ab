// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Horovod's environment variables, read for a Horovod user's job: each
// HOROVOD_* setting that has a Hora equivalent is taken as that HORA_*
// setting (unless the HORA_* one is set: it wins), said in one info line;
// the others are named as ignored, each in a warning. HOROVOD_RANK, HOROVOD_SIZE and the rest
// of the rank layout (which horarun exports for Horovod's scripts) are
// neither.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "hora/status.h"

namespace hora {

// A HOROVOD_* variable as the user set it.
struct HorovodOrigin {
  std::string name;   // "HOROVOD_CYCLE_TIME"
  std::string value;  // as set, before translation
};

struct HorovodSettings {
  std::map<std::string, std::string> hora;  // HORA_* name -> value, to layer under the HORA_* env
  // What was taken, for one info line: "HOROVOD_CYCLE_TIME=5 is taken as
  // HORA_CYCLE_TIME_MS=5", "HOROVOD_TIMELINE=DYNAMIC needs nothing in Hora".
  std::vector<std::string> taken;
  // What was not, each a warning: "HOROVOD_AUTOTUNE is ignored: ...".
  std::vector<std::string> ignored;
  // HORA_* name -> the HOROVOD_* variable it was taken from (also where
  // horarun took it before the rank started), for errors in the user's names.
  std::map<std::string, HorovodOrigin> from;
};

// From `env` (any variables: those named HOROVOD_* are read); `hora` holds
// the HORA_* settings already given (a HOROVOD_* alias of one is ignored,
// with a notice).
HorovodSettings ReadHorovodSettings(const std::map<std::string, std::string>& env,
                                    const std::map<std::string, std::string>& hora);

// `st` (a settings error), naming the HOROVOD_* variable a HORA_* setting
// it names was taken from: "HOROVOD_LOG_LEVEL='Loud' (taken as
// HORA_LOG_LEVEL='loud') is invalid: ..." for "HORA_LOG_LEVEL='loud' is
// invalid: ...".
Status InHorovodsNames(const Status& st, const HorovodSettings& horovod);

}  // namespace hora
