// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "flags.h"

#include <string>
#include <vector>

#include "flag_rows.h"

namespace hora::horarun {
namespace {

const std::vector<FlagSpec>& Table() {
  static const std::vector<FlagSpec> table = [] {
    std::vector<FlagSpec> t = flag_rows::Job();
    for (FlagSpec& f : flag_rows::Tuning()) t.push_back(f);
    return t;
  }();
  return table;
}

}  // namespace

const std::vector<FlagSpec>& Flags() { return Table(); }

const FlagSpec* FindFlag(std::string_view name) {
  for (const FlagSpec& f : Table()) {
    std::string_view names = f.names;
    for (size_t p = 0; p <= names.size();) {
      size_t q = names.find('|', p);
      if (q == std::string_view::npos) q = names.size();
      if (names.substr(p, q - p) == name) return &f;
      p = q + 1;
    }
  }
  return nullptr;
}

Result<FlagMatch> MatchFlag(std::string_view name) {
  if (const FlagSpec* exact = FindFlag(name)) return FlagMatch{exact, std::string(name)};
  FlagMatch found;
  std::vector<std::string> candidates;  // the first long name of each row that matches
  if (name.size() <= 2 || name.substr(0, 2) != "--") return found;
  for (const FlagSpec& f : Table()) {
    std::string_view names = f.names;
    for (size_t p = 0; p <= names.size();) {
      size_t q = names.find('|', p);
      if (q == std::string_view::npos) q = names.size();
      const std::string_view n = names.substr(p, q - p);
      p = q + 1;
      if (n.substr(0, 2) != "--" || n.substr(0, name.size()) != name) continue;
      if (found.spec != &f) candidates.emplace_back(n);
      found = {&f, std::string(n)};
      break;  // (one row counts once)
    }
  }
  if (candidates.size() > 1) {
    std::string list;
    for (const std::string& c : candidates) list += (list.empty() ? "" : ", ") + c;
    return InvalidArgument("ambiguous option '" + std::string(name) + "': it could be " + list);
  }
  return found;
}

Status ApplyFlag(const FlagSpec& spec, Options& o, const std::string& flag,
                 const std::string& value) {
  if (spec.unsupported != nullptr) return InvalidArgument(flag + ": " + spec.unsupported);
  return spec.apply(o, flag, value);
}

std::string FlagsHelp() {
  std::string out;
  const char* group = "";
  for (const FlagSpec& f : Table()) {
    if (std::string(group) != f.group) {
      group = f.group;
      out += std::string("\n") + group + ":\n";
    }
    std::string left = "  ";
    std::string names = f.names;
    for (size_t p; (p = names.find('|')) != std::string::npos;) names.replace(p, 1, ", ");
    left += names;
    if (f.metavar != nullptr) left += std::string(" ") + f.metavar;
    const std::string text =
        f.unsupported != nullptr ? std::string("refused: ") + f.unsupported : f.help;
    if (left.size() < 36) {
      out += left + std::string(38 - left.size(), ' ') + text + "\n";
    } else {
      out += left + "\n" + std::string(38, ' ') + text + "\n";
    }
  }
  return out;
}

}  // namespace hora::horarun
