// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "config_file.h"

#include <string_view>

namespace hora::horarun {
namespace {

// One key of a section: a value for `flag`, or (boolean keys) `flag` when
// true and `off_flag` when false (nullptr: nothing to give).
struct Key {
  const char* section;
  const char* key;
  const char* flag;
  bool boolean = false;
  const char* off_flag = nullptr;
};

constexpr Key kKeys[] = {
    {"params", "fusion_threshold_mb", "--fusion-threshold-mb"},
    {"params", "cycle_time_ms", "--cycle-time-ms"},
    {"params", "cache_capacity", "--cache-capacity"},
    {"params", "hierarchical_allreduce", "--hierarchical-allreduce", true,
     "--no-hierarchical-allreduce"},
    {"params", "hierarchical_allgather", "--hierarchical-allgather", true,
     "--no-hierarchical-allgather"},
    {"params", "torus_allreduce", "--torus-allreduce", true, "--no-torus-allreduce"},
    {"autotune", "enabled", "--autotune", true, "--no-autotune"},
    {"autotune", "log_file", "--autotune-log-file"},
    {"autotune", "warmup_samples", "--autotune-warmup-samples"},
    {"autotune", "steps_per_sample", "--autotune-steps-per-sample"},
    {"autotune", "bayes_opt_max_samples", "--autotune-bayes-opt-max-samples"},
    {"autotune", "gaussian_process_noise", "--autotune-gaussian-process-noise"},
    {"timeline", "filename", "--timeline-filename"},
    {"timeline", "mark_cycles", "--timeline-mark-cycles", true},
    {"stall_check", "enabled", "--stall-check", true, "--no-stall-check"},
    {"stall_check", "warning_time_seconds", "--stall-check-warning-time-seconds"},
    {"stall_check", "shutdown_time_seconds", "--stall-check-shutdown-time-seconds"},
    {"library_options", "mpi_threads_disable", "--mpi-threads-disable", true},
    {"library_options", "num_nccl_streams", "--num-nccl-streams"},
    {"library_options", "thread_affinity", "--thread-affinity"},
    {"library_options", "gloo_timeout_seconds", "--gloo-timeout-seconds"},
    {"logging", "level", "--log-level"},
    {"logging", "with_timestamp", "--log-with-timestamp", true, "--log-without-timestamp"},
};

// YAML 1.1's booleans, as PyYAML reads them.
int Boolean(std::string_view v) {
  for (const char* t : {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"}) {
    if (v == t) return 1;
  }
  for (const char* f : {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"}) {
    if (v == f) return 0;
  }
  return -1;
}

std::string KeysOf(std::string_view section) {
  std::string out;
  for (const Key& k : kKeys) {
    if (section == k.section) out += std::string(out.empty() ? "" : ", ") + k.key;
  }
  return out;
}

}  // namespace

Result<std::vector<ConfigFileFlag>> ConfigFileFlags(const YamlNode& root, const std::string& path,
                                                    std::vector<std::string>* ignored) {
  std::vector<ConfigFileFlag> out;
  auto where = [&](const YamlNode& node, const std::string& name) {
    return path + ":" + std::to_string(node.line) + " (" + name + ")";
  };
  for (const auto& [section, node] : root.items) {
    if (node.kind == YamlNode::Kind::kNull) continue;
    if (section == "controller") {
      if (node.kind != YamlNode::Kind::kScalar || (node.scalar != "gloo" && node.scalar != "mpi")) {
        return InvalidArgument(where(node, section) + ": expected gloo or mpi");
      }
      out.push_back({"--" + node.scalar, "", where(node, section)});
      continue;
    }
    if (KeysOf(section).empty()) {
      ignored->push_back(where(node, section) +
                         ": unknown key, ignored (horovodrun's are controller, params, autotune, "
                         "timeline, stall_check, library_options, logging)");
      continue;
    }
    if (node.kind != YamlNode::Kind::kMap) {
      return InvalidArgument(where(node, section) + ": expected a mapping of " + KeysOf(section));
    }
    const YamlNode* enabled = section == "autotune" ? node.Find("enabled") : nullptr;
    const bool autotune_on = enabled != nullptr && Boolean(enabled->scalar) == 1;
    for (const auto& [name, value] : node.items) {
      const std::string full = section + "." + name;
      const Key* key = nullptr;
      for (const Key& k : kKeys) {
        if (section == k.section && name == k.key) key = &k;
      }
      if (key == nullptr) {
        ignored->push_back(where(value, full) + ": unknown key, ignored (" + section + " has " +
                           KeysOf(section) + ")");
        continue;
      }
      if (value.kind == YamlNode::Kind::kNull) continue;
      if (value.kind != YamlNode::Kind::kScalar) {
        return InvalidArgument(where(value, full) + ": expected a value, not a mapping");
      }
      if (section == "autotune" && name != "enabled" && !autotune_on) continue;
      if (!key->boolean) {
        out.push_back({key->flag, value.scalar, where(value, full)});
        continue;
      }
      const int b = Boolean(value.scalar);
      if (b < 0) {
        return InvalidArgument(where(value, full) + ": expected true or false, got '" +
                               value.scalar + "'");
      }
      const char* flag = b == 1 ? key->flag : key->off_flag;
      if (flag != nullptr) out.push_back({flag, "", where(value, full)});
    }
  }
  return out;
}

}  // namespace hora::horarun
