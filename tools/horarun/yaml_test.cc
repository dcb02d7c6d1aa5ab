// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "yaml.h"

#include <gtest/gtest.h>

#include <string>

namespace hora::horarun {
namespace {

TEST(Yaml, ReadsHorovodrunsConfigShape) {
  const char* text =
      "# horovodrun config\n"
      "---\n"
      "controller: gloo   # or mpi\n"
      "params:\n"
      "  fusion_threshold_mb: 32\n"
      "  cycle_time_ms: 2.5\n"
      "\n"
      "  hierarchical_allreduce: false\n"
      "timeline:\n"
      "    filename: '/tmp/it''s #1.json'\n"
      "    mark_cycles: \"no\"\n"
      "logging:\n"
      "  level:\n"
      "stall_check: {}\n";
  // The last line is a flow mapping: an error; without it the rest parses.
  std::string ok(text);
  ok = ok.substr(0, ok.find("stall_check"));
  auto y = ParseYaml(ok, "c.yaml");
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  ASSERT_EQ(y->items.size(), 4u);
  EXPECT_EQ(y->items[0].first, "controller");
  EXPECT_EQ(y->Find("controller")->scalar, "gloo");
  EXPECT_EQ(y->Find("controller")->line, 3);
  const YamlNode* params = y->Find("params");
  ASSERT_NE(params, nullptr);
  EXPECT_EQ(params->kind, YamlNode::Kind::kMap);
  ASSERT_EQ(params->items.size(), 3u);
  EXPECT_EQ(params->Find("fusion_threshold_mb")->scalar, "32");
  EXPECT_EQ(params->Find("cycle_time_ms")->scalar, "2.5");
  EXPECT_EQ(params->Find("hierarchical_allreduce")->scalar, "false");
  EXPECT_EQ(params->Find("hierarchical_allreduce")->line, 8);
  EXPECT_EQ(y->Find("timeline")->Find("filename")->scalar, "/tmp/it's #1.json");
  EXPECT_EQ(y->Find("timeline")->Find("mark_cycles")->scalar, "no");
  EXPECT_EQ(y->Find("logging")->Find("level")->kind, YamlNode::Kind::kNull);
  EXPECT_EQ(y->Find("missing"), nullptr);

  auto flow = ParseYaml(text, "c.yaml");
  ASSERT_FALSE(flow.ok());
  EXPECT_EQ(flow.status().message(),
            "c.yaml:14: flow collections ([...] and {...}) are not supported (horarun reads "
            "nested 'key: value' mappings)");
}

TEST(Yaml, EmptyDocumentsAndEscapes) {
  auto empty = ParseYaml("# nothing\n\n", "e.yaml");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->kind, YamlNode::Kind::kMap);
  EXPECT_TRUE(empty->items.empty());
  auto esc = ParseYaml("a: \"x\\ty\\\"z\\\\\"\r\n'quoted key': 1\n", "e.yaml");
  ASSERT_TRUE(esc.ok()) << esc.status().ToString();
  EXPECT_EQ(esc->Find("a")->scalar, "x\ty\"z\\");
  EXPECT_EQ(esc->Find("quoted key")->scalar, "1");
  auto end = ParseYaml("a: 1\n...\nnot yaml at all\n", "e.yaml");
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->items.size(), 1u);
}

TEST(Yaml, UnsupportedAndMalformedInputNamesTheLine) {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {"a:\n  - 1\n", "f.yaml:2: sequences ('- item') are not supported"},
      {"a: [1, 2]\n", "f.yaml:1: flow collections"},
      {"a: |\n  text\n", "f.yaml:1: block scalars (| and >) are not supported"},
      {"a: &x 1\n", "f.yaml:1: anchors and aliases"},
      {"a: !!int 1\n", "f.yaml:1: tags (!) are not supported"},
      {"a:\n\tb: 1\n", "f.yaml:2: a tab in the indentation"},
      {"a: 1\na: 2\n", "f.yaml:2: the key 'a' appears twice"},
      {"a: 1\n  b: 2\n", "f.yaml:2: an indentation of 2 spaces that matches no key above"},
      {"a:\n    b: 1\n  c: 2\n", "f.yaml:3: an indentation of 2 spaces"},
      {"  a: 1\n", "f.yaml:1: the first key is indented"},
      {"just words\n", "f.yaml:1: expected 'key: value' or 'key:', got 'just words'"},
      {"a: 'open\n", "f.yaml:1: a ' quote that does not end on its line"},
      {"a: \"x\\q\"\n", "f.yaml:1: the escape \\q is not supported"},
      {"a: 'x' y\n", "f.yaml:1: text after the quoted value"},
      {"a: b: c\n", "f.yaml:1: a ':' followed by a space inside the value 'b: c'"},
      {"a:b\n", "f.yaml:1: expected 'key: value'"},
      {"a: 1\n---\nb: 2\n", "f.yaml:2: several documents in one file are not supported"},
      {": 1\n", "f.yaml:1: an empty key"},
  };
  for (const Case& c : cases) {
    auto r = ParseYaml(c.text, "f.yaml");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().message().rfind(c.error, 0), 0u)
        << "input: " << c.text << "\nerror: " << r.status().message();
  }
}

}  // namespace
}  // namespace hora::horarun
