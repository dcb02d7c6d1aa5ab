// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "flag_rows.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "common/config.h"
#include "options.h"

namespace hora::horarun::flag_rows {

Status Bad(const std::string& flag, const std::string& value, const std::string& why) {
  return InvalidArgument(flag + " '" + value + "' " + why);
}

// A whole number in [min, max].
Result<long long> Whole(const std::string& flag, const std::string& v, long long min, long long max,
                        const std::string& why) {
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || errno != 0 || *end != '\0' || n < min || n > max) return Bad(flag, v, why);
  return n;
}

// A finite number, 0 or more.
Status NonNegative(const std::string& flag, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || errno != 0 || *end != '\0' || !std::isfinite(x) || x < 0) {
    return Bad(flag, v, "is not a number, 0 or more");
  }
  return Status::Ok();
}

Result<double> PositiveSeconds(const std::string& flag, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const double secs = std::strtod(v.c_str(), &end);
  if (v.empty() || errno != 0 || *end != '\0' || !std::isfinite(secs) || secs <= 0 || secs > 1e8) {
    return Bad(flag, v, "is not a positive number of seconds (at most 1e8)");
  }
  return secs;
}

// `name`=`value` for every rank, checked now against the config table.
Status SetSetting(Options& o, const std::string& flag, const std::string& given,
                  const std::string& name, const std::string& value) {
  auto checked = ConfigFromEnv({{name, value}});
  if (!checked.ok())
    return InvalidArgument(flag + " '" + given + "': " + checked.status().message());
  o.settings[name] = value;
  return Status::Ok();
}

Status NoValue(Options&, const std::string&, const std::string&) { return Status::Ok(); }

Status SetController(Options& o, const std::string& flag, const std::string& which) {
  if (!o.controller.empty() && o.controller != which) {
    return InvalidArgument(flag + ": --gloo and --mpi exclude each other; give one");
  }
  o.controller = which;
  if (which == "mpi") o.mpi = true;
  return Status::Ok();
}

bool IsVariableName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace hora::horarun::flag_rows
