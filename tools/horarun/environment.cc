// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "environment.h"

#include <cctype>

namespace hora::horarun {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool IsShellName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace

bool IsForwarded(const std::string& name) {
  static const char* const kNever[] = {
      "OLDPWD", "_HOROVOD_SECRET_KEY", "HORA_SECRET", "PWD",     "SHLVL", "_", "PPID", "UID",
      "EUID",   "SHELLOPTS",           "BASHOPTS",    "HOSTNAME"};
  for (const char* n : kNever) {
    if (name == n) return false;
  }
  if (name.rfind("BASH_FUNC_", 0) == 0 || name.rfind("SSH_", 0) == 0) return false;
  if (EndsWith(name, "CUDA_VISIBLE_DEVICES")) return false;
  return IsShellName(name);
}

std::map<std::string, std::string> ForwardedEnvironment(
    const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : env) {
    if (IsForwarded(name)) out.emplace(name, value);
  }
  return out;
}

Result<std::map<std::string, std::string>> ExportedVariables(
    const std::vector<std::string>& exports, const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> out;
  for (const std::string& x : exports) {
    const size_t eq = x.find('=');
    if (eq != std::string::npos) {
      out[x.substr(0, eq)] = x.substr(eq + 1);
      continue;
    }
    auto it = env.find(x);
    if (it == env.end()) {
      return InvalidArgument("-x " + x + ": " + x +
                             " is not set in horarun's environment (give -x " + x +
                             "=VALUE to set it)");
    }
    out[x] = it->second;
  }
  return out;
}

}  // namespace hora::horarun
