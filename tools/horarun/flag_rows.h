// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The rows of horarun's flag table (flags.h), by area, and the checks their
// values share. flags.cc joins the areas into the table.
#pragma once

#include <string>
#include <vector>

#include "flags.h"
#include "hora/status.h"

namespace hora::horarun::flag_rows {

// The job, how ranks start: flag_rows_job.cc.
std::vector<FlagSpec> Job();
// Tunables, diagnostics, elastic training: flag_rows_tuning.cc.
std::vector<FlagSpec> Tuning();

// An error naming the flag, the value given and `why` it is refused.
Status Bad(const std::string& flag, const std::string& value, const std::string& why);

// A whole number in [min, max].
Result<long long> Whole(const std::string& flag, const std::string& v, long long min, long long max,
                        const std::string& why);

// A finite number, 0 or more.
Status NonNegative(const std::string& flag, const std::string& v);

// A finite number of seconds above 0, at most 1e8.
Result<double> PositiveSeconds(const std::string& flag, const std::string& v);

// `name`=`value` for every rank, checked now against the config table.
Status SetSetting(Options& o, const std::string& flag, const std::string& given,
                  const std::string& name, const std::string& value);

// The apply of a flag that is accepted and changes nothing.
Status NoValue(Options&, const std::string&, const std::string&);

// --gloo or --mpi (`which`: "gloo" or "mpi"); they exclude each other.
Status SetController(Options& o, const std::string& flag, const std::string& which);

// Letters, digits and _, not starting with a digit.
bool IsVariableName(const std::string& name);

}  // namespace hora::horarun::flag_rows
