// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The part of YAML that horovodrun's --config-file uses: nested block
// mappings of scalars, indented with spaces, with comments. Accepted:
//   key: value            plain scalar (up to a " #" comment), trimmed
//   key: 'va''lue'        single-quoted ('' is one quote)
//   key: "va\"lue"        double-quoted (escapes \\ \" \n \t)
//   key:                  a nested mapping on the lines below, indented
//                         deeper; with nothing below, a null value
//   # comment, blank lines, a leading "---" and a closing "..."
// Everything else (sequences, flow collections { } [ ], block scalars | >,
// anchors, aliases, tags, tabs in indentation, duplicate keys, a scalar
// continued on the next line) is an error naming the file, the line and
// what is not supported. Values stay strings: the reader of each key says
// what it accepts.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hora/status.h"

namespace hora::horarun {

struct YamlNode {
  enum class Kind { kNull, kScalar, kMap };
  Kind kind = Kind::kNull;
  std::string scalar;                                   // kScalar
  std::vector<std::pair<std::string, YamlNode>> items;  // kMap, in file order
  int line = 0;                                         // where it was written (1-based)

  // The value of `key` in a mapping; nullptr when absent (or not a mapping).
  const YamlNode* Find(std::string_view key) const;
};

// Parses `text`; `path` only names the file in errors. The top level is a
// mapping (an empty document is an empty one).
Result<YamlNode> ParseYaml(std::string_view text, const std::string& path);

}  // namespace hora::horarun
