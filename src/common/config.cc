// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/config.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>

#include "common/config_rows.h"
#include "common/units.h"

extern char** environ;

namespace hora {
namespace {

using config_internal::Rows;
using config_internal::SettingRow;

constexpr const char* kLogLevelNames[] = {"trace", "debug", "info", "warning", "error", "off"};

std::string Accepted(SettingType t, bool zero_ok, double max, double min) {
  switch (t) {
    case SettingType::kDouble: {
      std::string s = zero_ok ? "a number, 0 or greater" : "a number greater than 0";
      if (min > 0) {
        std::ostringstream os;
        os << (zero_ok ? "0 or a number of at least " : "a number of at least ") << min;
        s = os.str();
      }
      if (max > 0) {
        std::ostringstream os;
        os << " and at most " << max;
        s += os.str();
      }
      return s;
    }
    case SettingType::kBytes:
      return std::string("a byte count ") + (zero_ok ? "(0 or more)" : "greater than 0") +
             " such as 65536, 64K, 4M or 1G";
    case SettingType::kCount:
      return std::string("a whole number ") + (zero_ok ? "(0 or more)" : "greater than 0") +
             " such as 1024 (or 1K)";
    case SettingType::kString:
      return "a string";
    case SettingType::kLogLevel:
      return "one of trace, debug, info, warning, error (Horovod's fatal is taken as error), off";
  }
  return "?";
}

Status Apply(const SettingRow& row, const std::string& value, Config& config) {
  auto bad = [&] {
    return InvalidArgument(std::string(row.spec.name) + "='" + value + "' is invalid: expected " +
                           Accepted(row.spec.type, row.zero_ok, row.max, row.min));
  };
  switch (row.spec.type) {
    case SettingType::kDouble: {
      errno = 0;
      char* end = nullptr;
      double v = std::strtod(value.c_str(), &end);
      if (value.empty() || errno != 0 || end == nullptr || *end != '\0' || !std::isfinite(v) ||
          !(v > 0 || (row.zero_ok && v == 0)) || (row.max > 0 && v > row.max) ||
          (v > 0 && v < row.min)) {
        return bad();
      }
      config.*row.as_double = v;
      return Status::Ok();
    }
    case SettingType::kBytes:
    case SettingType::kCount: {
      auto v = ParseBytes(value);
      if (!v || (*v == 0 && !row.zero_ok)) return bad();
      config.*row.as_bytes = *v;
      return Status::Ok();
    }
    case SettingType::kString:
      if (row.spec.layout_only) return Status::Ok();
      if (row.choices != nullptr) {
        const std::string allowed = std::string("|") + row.choices + "|";
        if (allowed.find("|" + value + "|") == std::string::npos) {
          return InvalidArgument(std::string(row.spec.name) + "='" + value +
                                 "' is invalid: expected one of '" + row.choices + "'");
        }
      }
      config.*row.as_string = value;
      return Status::Ok();
    case SettingType::kLogLevel:
      for (size_t i = 0; i < std::size(kLogLevelNames); ++i) {
        if (value == kLogLevelNames[i]) {
          config.*row.as_log_level = static_cast<LogLevel>(i);
          return Status::Ok();
        }
      }
      return bad();
  }
  return InternalError("unhandled setting type");
}

std::string ValueOf(const SettingRow& row, const Config& c) {
  std::ostringstream os;
  switch (row.spec.type) {
    case SettingType::kDouble:
      os << c.*row.as_double;
      break;
    case SettingType::kBytes:
    case SettingType::kCount:
      os << c.*row.as_bytes;
      break;
    case SettingType::kString:
      if (row.spec.layout_only) {
        os << "(launcher)";
      } else if (row.secret) {
        os << ((c.*row.as_string).empty() ? "(unset)" : "(set)");
      } else {
        os << c.*row.as_string;
      }
      break;
    case SettingType::kLogLevel:
      os << kLogLevelNames[static_cast<int>(c.*row.as_log_level)];
      break;
  }
  return os.str();
}

}  // namespace

const std::vector<SettingSpec>& AllSettings() {
  static const std::vector<SettingSpec> specs = [] {
    std::vector<SettingSpec> v;
    for (const auto& r : Rows()) v.push_back(r.spec);
    return v;
  }();
  return specs;
}

const char* SettingTypeName(SettingType t) {
  switch (t) {
    case SettingType::kDouble:
      return "double";
    case SettingType::kBytes:
      return "bytes";
    case SettingType::kCount:
      return "count";
    case SettingType::kString:
      return "string";
    case SettingType::kLogLevel:
      return "log-level";
  }
  return "?";
}

Result<Config> ConfigFromEnv(const std::map<std::string, std::string>& env) {
  Config config{};
  for (const auto& row : Rows()) {
    // Defaults go through the same parser as user values: one source of truth.
    Status st = Apply(row, row.spec.default_value, config);
    if (!st.ok()) return InternalError("bad default in settings table: " + st.message());
  }
  for (const auto& row : Rows()) {
    auto it = env.find(row.spec.name);
    if (it == env.end()) continue;
    HORA_RETURN_IF_ERROR(Apply(row, it->second, config));
  }
  if (config.backend == "nccl") {  // (Horovod's habit: NCCL for GPU tensors, Hora for the rest)
    if (env.count("HORA_GPU_BACKEND") != 0 && config.gpu_backend != "nccl") {
      return InvalidArgument(
          "HORA_BACKEND=nccl runs GPU tensors through NCCL, but HORA_GPU_BACKEND=" +
          config.gpu_backend + " says otherwise: set one of them");
    }
    config.backend = "hora";
    config.gpu_backend = "nccl";
  }
  return config;
}

std::map<std::string, std::string> ReadProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "HORA_", 5) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    env.emplace(std::string(*e, static_cast<size_t>(eq - *e)), std::string(eq + 1));
  }
  return env;
}

std::vector<std::string> UnknownSettings(const std::map<std::string, std::string>& env) {
  std::vector<std::string> unknown;
  for (const auto& [name, value] : env) {
    if (name.rfind("HORA_", 0) != 0) continue;
    bool known = false;
    for (const auto& row : Rows()) known = known || name == row.spec.name;
    if (!known) unknown.push_back(name);
  }
  return unknown;
}

std::vector<std::pair<std::string, std::string>> AgreedSettings(const Config& config) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& row : Rows()) {
    if (row.agree) out.emplace_back(row.spec.name, ValueOf(row, config));
  }
  return out;
}

std::string FormatConfig(const Config& config) {
  std::ostringstream os;
  for (const auto& row : Rows()) {
    os << row.spec.name << "=" << ValueOf(row, config) << "  # " << SettingTypeName(row.spec.type)
       << ", default '" << row.spec.default_value << "': " << row.spec.doc << "\n";
  }
  return os.str();
}

Hierarchy HierarchyOf(const Config& config) {
  if (config.hierarchical_allreduce == "1") return Hierarchy::kOn;
  if (config.hierarchical_allreduce == "0") return Hierarchy::kOff;
  if (config.hierarchical_allreduce == "one") return Hierarchy::kOne;
  return Hierarchy::kAuto;  // (the table accepts nothing else)
}

BlocksAtOnce BlocksAtOnceOf(const Config& config) {
  if (config.blocks_at_once == "1") return BlocksAtOnce::kOn;
  if (config.blocks_at_once == "0") return BlocksAtOnce::kOff;
  return BlocksAtOnce::kAuto;  // (the table accepts nothing else)
}

const char* HierarchyName(Hierarchy h) {
  switch (h) {
    case Hierarchy::kOff:
      return "0";
    case Hierarchy::kOn:
      return "1";
    case Hierarchy::kAuto:
      return "auto";
    case Hierarchy::kOne:
      return "one";
  }
  return "?";
}

}  // namespace hora
