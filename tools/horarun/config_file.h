// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// horovodrun's --config-file: YAML whose keys stand for flags. Top-level
// keys: controller (gloo|mpi), params, autotune, timeline, stall_check,
// library_options, logging; each section's keys are listed in
// config_file.cc beside the flag each one gives. The file is read into the
// flags it stands for, which ParseOptions applies like the command line's,
// except that a setting given on the command line wins, wherever it stands.
// As in horovodrun, the autotune section's other keys count only when
// autotune.enabled is true; a null value counts as not given. An unknown
// key is ignored, as horovodrun ignores it, with a notice naming the file
// and line (a misspelt key is not taken silently); a value of the wrong kind
// is an error naming them.
#pragma once

#include <string>
#include <vector>

#include "hora/status.h"
#include "yaml.h"

namespace hora::horarun {

struct ConfigFileFlag {
  std::string flag;   // "--cycle-time-ms"
  std::string value;  // "" for flags without one
  std::string where;  // "c.yaml:3 (params.cycle_time_ms)", for errors
};

// The flags `root` (the parsed file at `path`) stands for, in file order;
// a notice for each unknown key is added to `ignored`.
Result<std::vector<ConfigFileFlag>> ConfigFileFlags(const YamlNode& root, const std::string& path,
                                                    std::vector<std::string>* ignored);

}  // namespace hora::horarun
