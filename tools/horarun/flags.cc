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
