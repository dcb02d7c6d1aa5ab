// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "yaml.h"

#include <cstddef>

namespace hora::horarun {
namespace {

// One significant line: "key: value" or "key:" at some indentation.
struct Line {
  int number = 0;
  size_t indent = 0;
  std::string key;
  bool has_value = false;
  std::string value;
};

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& path) : text_(text), path_(path) {}

  Result<YamlNode> Parse() {
    HORA_RETURN_IF_ERROR(ReadLines());
    YamlNode root;
    root.kind = YamlNode::Kind::kMap;
    root.line = 1;
    size_t i = 0;
    if (!lines_.empty()) {
      if (lines_[0].indent != 0) return Error(lines_[0].number, "the first key is indented");
      HORA_RETURN_IF_ERROR(ParseMap(i, 0, root));
    }
    return root;
  }

 private:
  Status Error(int line, const std::string& what) const {
    return InvalidArgument(path_ + ":" + std::to_string(line) + ": " + what);
  }

  Status Unsupported(int line, const std::string& what) const {
    return Error(line, what + " are not supported (horarun reads nested 'key: value' mappings)");
  }

  Status ReadLines() {
    int number = 0;
    bool first = true;
    for (size_t pos = 0; pos <= text_.size();) {
      size_t end = text_.find('\n', pos);
      if (end == std::string_view::npos) end = text_.size();
      std::string_view raw = text_.substr(pos, end - pos);
      pos = end + 1;
      ++number;
      if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
      size_t indent = 0;
      while (indent < raw.size() && raw[indent] == ' ') ++indent;
      std::string_view content = TrimRight(raw.substr(indent));
      if (!content.empty() && content.front() == '\t') {
        return Error(number, "a tab in the indentation (indent with spaces)");
      }
      if (content.empty() || content.front() == '#') continue;
      if (indent == 0 && (content == "---" || content.rfind("--- ", 0) == 0)) {
        if (!first) return Unsupported(number, "several documents in one file");
        first = false;
        if (!TrimLeft(content.substr(3)).empty() && TrimLeft(content.substr(3)).front() != '#') {
          return Error(number, "text after '---'");
        }
        continue;
      }
      if (indent == 0 && content == "...") break;
      first = false;
      Line line;
      line.number = number;
      line.indent = indent;
      HORA_RETURN_IF_ERROR(ParseLine(content, line));
      lines_.push_back(std::move(line));
    }
    return Status::Ok();
  }

  // A quoted scalar starting at s[0]; `used` gets the characters it took.
  Result<std::string> Quoted(std::string_view s, int number, size_t& used) const {
    const char q = s[0];
    std::string out;
    for (size_t i = 1; i < s.size(); ++i) {
      const char c = s[i];
      if (q == '\'' && c == '\'') {
        if (i + 1 < s.size() && s[i + 1] == '\'') {
          out += '\'';
          ++i;
          continue;
        }
        used = i + 1;
        return out;
      }
      if (q == '"' && c == '"') {
        used = i + 1;
        return out;
      }
      if (q == '"' && c == '\\') {
        if (i + 1 >= s.size()) break;
        const char e = s[++i];
        if (e == '\\' || e == '"') {
          out += e;
        } else if (e == 'n') {
          out += '\n';
        } else if (e == 't') {
          out += '\t';
        } else {
          return Error(number, std::string("the escape \\") + e +
                                   " is not supported (only \\\\ \\\" \\n \\t)");
        }
        continue;
      }
      out += c;
    }
    return Error(number, std::string("a ") + q + " quote that does not end on its line");
  }

  Status ParseLine(std::string_view content, Line& line) const {
    const int n = line.number;
    if (content == "-" || content.rfind("- ", 0) == 0)
      return Unsupported(n, "sequences ('- item')");
    if (content.front() == '[' || content.front() == '{') {
      return Unsupported(n, "flow collections ([...] and {...})");
    }
    if (content.front() == '?') return Unsupported(n, "complex keys ('? key')");
    // The key.
    std::string_view rest;
    if (content.front() == '\'' || content.front() == '"') {
      size_t used = 0;
      HORA_ASSIGN_OR_RETURN(line.key, Quoted(content, n, used));
      rest = TrimLeft(content.substr(used));
      if (rest.empty() || rest.front() != ':') return Error(n, "expected ':' after the key");
      rest.remove_prefix(1);
    } else {
      size_t colon = std::string_view::npos;
      for (size_t i = 0; i < content.size(); ++i) {
        if (content[i] == ':' && (i + 1 == content.size() || content[i + 1] == ' ')) {
          colon = i;
          break;
        }
      }
      if (colon == std::string_view::npos) {
        return Error(n, "expected 'key: value' or 'key:', got '" + std::string(content) + "'");
      }
      line.key = std::string(TrimRight(content.substr(0, colon)));
      rest = content.substr(colon + 1);
    }
    if (line.key.empty()) return Error(n, "an empty key");
    if (!rest.empty() && rest.front() != ' ') return Error(n, "expected a space after ':'");
    rest = TrimLeft(rest);
    if (rest.empty() || rest.front() == '#') return Status::Ok();  // a nested mapping or null
    // The value.
    line.has_value = true;
    const char c = rest.front();
    if (c == '\'' || c == '"') {
      size_t used = 0;
      HORA_ASSIGN_OR_RETURN(line.value, Quoted(rest, n, used));
      std::string_view after = TrimLeft(rest.substr(used));
      if (!after.empty() && after.front() != '#') {
        return Error(n, "text after the quoted value: '" + std::string(after) + "'");
      }
      return Status::Ok();
    }
    if (c == '|' || c == '>') return Unsupported(n, "block scalars (| and >)");
    if (c == '&' || c == '*') return Unsupported(n, "anchors and aliases (& and *)");
    if (c == '!') return Unsupported(n, "tags (!)");
    if (c == '[' || c == '{') return Unsupported(n, "flow collections ([...] and {...})");
    if (c == '-' && (rest.size() == 1 || rest[1] == ' ')) return Unsupported(n, "sequences");
    if (c == '@' || c == '`' || c == '%') {
      return Error(n, std::string("a plain value may not start with '") + c + "'; quote it");
    }
    for (size_t i = 1; i < rest.size(); ++i) {
      if (rest[i] == '#' && (rest[i - 1] == ' ' || rest[i - 1] == '\t')) {
        rest = rest.substr(0, i);
        break;
      }
    }
    rest = TrimRight(rest);
    if (rest.find(": ") != std::string_view::npos || rest.back() == ':') {
      return Error(n, "a ':' followed by a space inside the value '" + std::string(rest) +
                          "' (a mapping on one line is not supported; quote a value with ': ')");
    }
    line.value = std::string(rest);
    return Status::Ok();
  }

  Status ParseMap(size_t& i, size_t indent, YamlNode& out) {
    out.kind = YamlNode::Kind::kMap;
    while (i < lines_.size()) {
      const Line& l = lines_[i];
      if (l.indent < indent) return Status::Ok();
      if (l.indent > indent) {
        return Error(l.number, "an indentation of " + std::to_string(l.indent) +
                                   " spaces that matches no key above (a value continued on "
                                   "another line is not supported)");
      }
      ++i;
      if (out.Find(l.key) != nullptr) {
        return Error(l.number, "the key '" + l.key + "' appears twice in one mapping");
      }
      YamlNode child;
      child.line = l.number;
      if (l.has_value) {
        child.kind = YamlNode::Kind::kScalar;
        child.scalar = l.value;
      } else if (i < lines_.size() && lines_[i].indent > indent) {
        HORA_RETURN_IF_ERROR(ParseMap(i, lines_[i].indent, child));
        child.line = l.number;
      }
      out.items.emplace_back(l.key, std::move(child));
    }
    return Status::Ok();
  }

  std::string_view text_;
  const std::string& path_;
  std::vector<Line> lines_;
};

}  // namespace

const YamlNode* YamlNode::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

Result<YamlNode> ParseYaml(std::string_view text, const std::string& path) {
  return Parser(text, path).Parse();
}

}  // namespace hora::horarun
