// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/horovod_env.h"

#include <algorithm>
#include <cctype>

namespace hora {
namespace {

// A HOROVOD_* setting and the HORA_* one it becomes; `translate` maps
// Horovod's value to Hora's ("" from it: nothing to set).
struct Alias {
  const char* horovod;
  const char* hora;
  std::string (*translate)(const std::string& value);
};

std::string Same(const std::string& v) { return v; }

std::string LogLevel(const std::string& v) {
  std::string l = v;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  return l == "fatal" ? "error" : l;  // Horovod's levels: trace ... error, fatal
}

// HOROVOD_STALL_CHECK_DISABLE=1 turns Horovod's stall inspector off: the
// report and the shutdown (two rows below).
std::string StallCheckDisable(const std::string& v) { return v == "1" ? "0" : ""; }

// HOROVOD_TIMELINE=DYNAMIC only allows start_timeline(), which Hora always does.
std::string Timeline(const std::string& v) { return v == "DYNAMIC" ? "" : v; }

constexpr Alias kAliases[] = {
    {"HOROVOD_FUSION_THRESHOLD", "HORA_FUSION_THRESHOLD_BYTES", Same},
    {"HOROVOD_CYCLE_TIME", "HORA_CYCLE_TIME_MS", Same},
    {"HOROVOD_CACHE_CAPACITY", "HORA_CACHE_CAPACITY", Same},
    {"HOROVOD_HIERARCHICAL_ALLREDUCE", "HORA_HIERARCHICAL_ALLREDUCE", Same},
    {"HOROVOD_AUTOTUNE", "HORA_AUTOTUNE", Same},
    {"HOROVOD_AUTOTUNE_LOG", "HORA_AUTOTUNE_LOG", Same},
    {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "HORA_AUTOTUNE_WARMUP_SAMPLES", Same},
    {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "HORA_AUTOTUNE_STEPS_PER_SAMPLE", Same},
    {"HOROVOD_TIMELINE", "HORA_TIMELINE", Timeline},
    {"HOROVOD_STALL_CHECK_TIME_SECONDS", "HORA_STALL_WARNING_S", Same},
    {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "HORA_STALL_SHUTDOWN_S", Same},
    {"HOROVOD_STALL_CHECK_DISABLE", "HORA_STALL_WARNING_S", StallCheckDisable},
    {"HOROVOD_STALL_CHECK_DISABLE", "HORA_STALL_SHUTDOWN_S", StallCheckDisable},
    {"HOROVOD_LOG_LEVEL", "HORA_LOG_LEVEL", LogLevel},
    {"HOROVOD_DISABLE_GROUP_FUSION", "HORA_DISABLE_GROUP_FUSION", Same},
    {"HOROVOD_GLOO_IFACE", "HORA_IFACE", Same},
    {"HOROVOD_START_TIMEOUT", "HORA_START_TIMEOUT_S", Same},
    // (horovodrun's --elastic-timeout default; horarun's too.)
    {"HOROVOD_ELASTIC_TIMEOUT", "HORA_ELASTIC_TIMEOUT_S", Same},
};

// Set by a launcher for the rank's layout and identity (horarun exports
// them for Horovod's scripts): not settings.
constexpr const char* kLayout[] = {"HOROVOD_RANK",       "HOROVOD_SIZE",       "HOROVOD_LOCAL_RANK",
                                   "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE",
                                   "HOROVOD_HOSTNAME",   "HOROVOD_ELASTIC"};

}  // namespace

HorovodSettings ReadHorovodSettings(const std::map<std::string, std::string>& env,
                                    const std::map<std::string, std::string>& hora) {
  HorovodSettings out;
  for (const auto& [name, value] : env) {
    if (name.rfind("HOROVOD_", 0) != 0) continue;
    if (std::find_if(std::begin(kLayout), std::end(kLayout),
                     [&](const char* l) { return name == l; }) != std::end(kLayout)) {
      continue;
    }
    // The other HOROVOD_* variable of the same HORA_* setting that gave it
    // `value` (horarun took HOROVOD_STALL_CHECK_DISABLE=1 as
    // HORA_STALL_WARNING_S=0 before this rank started), or "".
    auto set_by = [&](const Alias& mine, const std::string& value) -> std::string {
      for (const Alias& other : kAliases) {
        if (std::string(other.hora) != mine.hora || std::string(other.horovod) == mine.horovod) {
          continue;
        }
        const auto it = env.find(other.horovod);
        if (it != env.end() && other.translate(it->second) == value) {
          return std::string(other.horovod) + "=" + it->second;
        }
      }
      return "";
    };
    if (name == "HOROVOD_LOG_HIDE_TIME") {  // (horarun's --log-without-timestamp too)
      (value == "1" ? out.taken : out.ignored)
          .push_back(name + "=" + value +
                     (value == "1" ? " needs nothing in Hora" : " is ignored") +
                     ": Hora's log lines carry no time");
      continue;
    }
    bool known = false, said_nothing = false;
    for (const Alias& a : kAliases) {  // (a Horovod name may set several)
      if (name != a.horovod) continue;
      known = true;
      const Alias* alias = &a;
      const std::string translated = alias->translate(value);
      const auto set = hora.find(alias->hora);
      if (translated.empty()) {  // (Horovod's default, say: never "ignored")
        if (!said_nothing) out.taken.push_back(name + "=" + value + " needs nothing in Hora");
        said_nothing = true;
      } else if (set != hora.end() && set->second == translated) {
        // Already translated (horarun does so before it starts the ranks).
        out.taken.push_back(name + "=" + value + " is taken as " + alias->hora + "=" + translated);
        out.from.emplace(alias->hora, HorovodOrigin{name, value});
      } else if (set != hora.end()) {
        const std::string by = set_by(*alias, set->second);
        out.ignored.push_back(name + "=" + value + " is ignored: " +
                              (by.empty() ? std::string(alias->hora) + " is set"
                                          : by + " set " + alias->hora + "=" + set->second));
      } else if (const auto first = out.hora.find(alias->hora); first == out.hora.end()) {
        out.hora[alias->hora] = translated;
        out.taken.push_back(name + "=" + value + " is taken as " + alias->hora + "=" + translated);
        out.from[alias->hora] = HorovodOrigin{name, value};
      } else {  // (two Horovod names of one Hora setting: the first, by name, wins)
        const HorovodOrigin& winner = out.from[alias->hora];
        out.ignored.push_back(name + "=" + value + " is ignored: " + winner.name + "=" +
                              winner.value + " set " + alias->hora + "=" + first->second);
      }
    }
    if (!known) {
      out.ignored.push_back(name +
                            " is ignored: Hora has no equivalent (horarun --print-config "
                            "lists Hora's settings)");
    }
  }
  return out;
}

Status InHorovodsNames(const Status& st, const HorovodSettings& horovod) {
  if (st.ok()) return st;
  const std::string& m = st.message();
  for (const auto& [hora, origin] : horovod.from) {
    // "HORA_X='<value, quotes and all>' is invalid: ..."
    const size_t end = m.find("' is invalid");
    if (m.rfind(hora + "='", 0) != 0 || end == std::string::npos) continue;
    return Status(st.code(), origin.name + "='" + origin.value + "' (taken as " +
                                 m.substr(0, end + 1) + ")" + m.substr(end + 1));
  }
  return st;
}

}  // namespace hora
