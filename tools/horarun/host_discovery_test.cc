// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The discovery script's output, and running it.
#include "host_discovery.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>
#include <optional>
#include <thread>

#include <cstdio>
#include <fstream>

namespace hora::horarun {
namespace {

TEST(HostDiscovery, LinesGiveHostsAndSlots) {
  auto h = ParseDiscoveredHosts("a:4\n\n# a comment\n  b  \n[fe80::1]:2\nfe80::2\n[::1]\n", 3);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->size(), 5u);
  EXPECT_EQ((*h)[0].host, "a");
  EXPECT_EQ((*h)[0].slots, 4);
  EXPECT_EQ((*h)[1].host, "b");
  EXPECT_EQ((*h)[1].slots, 3);
  EXPECT_EQ((*h)[2].host, "fe80::1");
  EXPECT_EQ((*h)[2].slots, 2);
  EXPECT_EQ((*h)[3].host, "fe80::2");
  EXPECT_EQ((*h)[3].slots, 3);
  EXPECT_EQ((*h)[4].host, "::1");
  EXPECT_TRUE(ParseDiscoveredHosts("", 1)->empty());
}

TEST(HostDiscovery, BadLinesAreErrorsNamingThem) {
  struct Case {
    std::string output, error;
  };
  for (const Case& c : std::vector<Case>{
           {"a:2\nb\n", "line 2 'b' gives no slots: write host:slots, or give --slots-per-host"},
           {"a:0\n", "line 1 'a:0': the slots are not a count"},
           {"a:x\n", "line 1 'a:x': the slots are not a count"},
           {"a:\n", "line 1 'a:': the slots are not a count"},
           {"a b:2\n", "line 1 'a b:2' is not a host name"},
           {"a:1\na:2\n", "line 2 'a:2': a again"},
           {"[fe80::1\n", "line 1 '[fe80::1' is not a host name"},
       }) {
    auto h = ParseDiscoveredHosts(c.output, 0);
    ASSERT_FALSE(h.ok()) << c.output;
    EXPECT_EQ(h.status().message().rfind(c.error, 0), 0u) << h.status().message();
  }
}

class Script : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/hora-discovery-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { EXPECT_EQ(std::system(("rm -rf " + dir_).c_str()), 0); }
  std::string Write(const std::string& body) {
    const std::string path = dir_ + "/discover.sh";
    std::ofstream(path) << "#!/bin/sh\n" << body;
    chmod(path.c_str(), 0755);
    return path;
  }
  std::string dir_;
};

TEST_F(Script, ItsOutputIsReturned) {
  auto out = RunDiscoveryScript(Write("echo a:2\necho b\n"), std::chrono::seconds(10));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "a:2\nb\n");
}

TEST_F(Script, FailuresNameTheScript) {
  const std::string failing = Write("exit 3\n");
  auto out = RunDiscoveryScript(failing, std::chrono::seconds(10));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "the host discovery script '" + failing + "' exited with code 3");
  // What it wrote to its stderr comes with the failure (said once), its last
  // lines on one line; a script that answers keeps its stderr to itself.
  out = RunDiscoveryScript(Write("echo 'cannot reach the scheduler' >&2\necho 'try later' >&2\n"
                                 "exit 4\n"),
                           std::chrono::seconds(10));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find(
                "exited with code 4 (its stderr: cannot reach the scheduler try later)"),
            std::string::npos)
      << out.status().message();
  out = RunDiscoveryScript(Write("echo noise >&2\necho a:1\n"), std::chrono::seconds(10));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "a:1\n");
  out = RunDiscoveryScript(dir_ + "/none.sh", std::chrono::seconds(10));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("none.sh' cannot start"), std::string::npos);
}

TEST_F(Script, OneThatHangsIsKilledAtItsTimeout) {
  // Still writing (its output open), or done writing but still running.
  for (const char* body : {"echo a:1\nsleep 30\n", "echo a:1\nexec >&-\nsleep 30\n"}) {
    const auto start = std::chrono::steady_clock::now();
    auto out = RunDiscoveryScript(Write(body), std::chrono::milliseconds(300));
    ASSERT_FALSE(out.ok()) << body;
    EXPECT_EQ(out.status().code(), StatusCode::kTimeout) << body;
    EXPECT_NE(out.status().message().find("within 0.30 s (stopped)"), std::string::npos)
        << out.status().message();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << body;
  }
}

TEST_F(Script, ItsStdinIsNotHorarunsAndItIsNotWaitedFor) {
  // A script that reads stdin reads end of file (horarun's stdin goes to
  // the ranks), at once.
  auto out = RunDiscoveryScript(Write("read x\necho \"a:${x:-1}\"\n"), std::chrono::seconds(10));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "a:1\n");
}

TEST_F(Script, InTheBackgroundOneRunAtATimeAndItsResultOnce) {
  const std::string marker = dir_ + "/go";
  // Waits (up to 20 s) for the marker, then answers.
  BackgroundDiscovery d(
      Write("for i in $(seq 200); do [ -e " + marker + " ] && break; sleep 0.1; done\necho a:2\n"),
      std::chrono::seconds(30));
  EXPECT_TRUE(d.Start());
  EXPECT_FALSE(d.Start());             // (running)
  EXPECT_FALSE(d.Take().has_value());  // (no result yet: the caller is not held)
  std::ofstream(marker) << "";
  std::optional<Result<std::string>> r;
  for (int i = 0; i < 200 && !r; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    r = d.Take();
  }
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->ok()) << r->status().ToString();
  EXPECT_EQ(**r, "a:2\n");
  EXPECT_FALSE(d.Take().has_value());  // (once)
  EXPECT_TRUE(d.Start());              // the next run
}

TEST_F(Script, ARunInProgressEndsWithItsRunner) {
  const auto start = std::chrono::steady_clock::now();
  {
    BackgroundDiscovery d(Write("sleep 30\n"), std::chrono::seconds(60));
    EXPECT_TRUE(d.Start());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }  // killed, not waited for
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace hora::horarun
