// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The table of horarun's flags: horovodrun's (Horovod 0.28.1's, with their
// spellings and defaults) and Hora's own. Each row says every spelling, its value, what
// it sets (`dest`: spellings that share one are one setting, such as
// --autotune and --no-autotune) and how. Tunables become the HORA_* setting
// of the one config table (src/common/config_rows.cc) that every rank gets. A
// horovodrun flag that Hora cannot honour yet has `unsupported`, the reason:
// giving it is an error that says so, never silently ignored.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hora/status.h"

namespace hora::horarun {

struct Options;

struct FlagSpec {
  const char* group;    // heading in --help
  const char* names;    // "-np|--num-proc": every spelling, '|'-separated
  const char* metavar;  // the value's name in help; nullptr: takes no value
  const char* dest;     // the setting it sets
  const char* help;     // one line
  // Sets the flag's value (`flag` is the spelling given). nullptr with
  // `unsupported` set.
  Status (*apply)(Options& o, const std::string& flag, const std::string& value) = nullptr;
  const char* unsupported = nullptr;  // why Hora refuses it
};

const std::vector<FlagSpec>& Flags();

// The row of `name` (one spelling, as typed), or nullptr.
const FlagSpec* FindFlag(std::string_view name);

// The row of `name` as typed on the command line, and its full spelling:
// an exact name, or, as horovodrun's argparse allows, the prefix of one
// long option's names only (--fusion-threshold for --fusion-threshold-mb).
// A prefix of several rows' names is an error naming them; no match, a
// nullptr row.
struct FlagMatch {
  const FlagSpec* spec = nullptr;
  std::string name;
};
Result<FlagMatch> MatchFlag(std::string_view name);

// Applies `spec` given as `flag` with `value` ("" for flags without one):
// the unsupported reason as an error, else spec.apply.
Status ApplyFlag(const FlagSpec& spec, Options& o, const std::string& flag,
                 const std::string& value);

// Every flag, grouped, one or more lines each, for --help.
std::string FlagsHelp();

}  // namespace hora::horarun
