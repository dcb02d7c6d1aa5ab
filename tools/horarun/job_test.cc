// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "job.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace hora::horarun {
namespace {

TEST(Job, RemoteInputCarriesTheSecretAndEveryVariable) {
  const std::string in = RemoteInput(
      "s3", {{"HORA_SECRET", "s3"}, {"PATH", "/a b:/c"}, {"V", "x\ny%z\\w"}, {"bad-name", "1"}});
  EXPECT_EQ(in, "s3\nr PATH=/a b:/c\ne V=x\\012y\\045z\\134w\n\n");
}

// Runs the remote script of `launch` (its last argument) with sh, as the
// remote host would, with the input on its stdin, which stays open while
// the rank runs (its end stops the rank); returns the rank's output once it
// is `want_size` bytes long (or after 5 s).
std::string RunAsARemoteHost(const RankLaunch& launch, size_t want_size) {
  char script_path[] = "/tmp/hora-job-test-XXXXXX";
  const int sfd = mkstemp(script_path);
  if (sfd < 0) return "mkstemp failed";
  FILE* sf = fdopen(sfd, "w");
  std::fputs(launch.argv.back().c_str(), sf);
  std::fclose(sf);
  const std::string out_path = std::string(script_path) + ".out";
  FILE* p = popen(("sh " + std::string(script_path) + " >" + out_path).c_str(), "w");
  if (p == nullptr) return "popen failed";
  std::fputs(launch.input->c_str(), p);
  std::fflush(p);
  std::string out;
  for (int i = 0; i < 500 && out.size() < want_size; ++i) {
    usleep(10000);
    FILE* f = std::fopen(out_path.c_str(), "r");
    out.clear();
    char buf[256];
    for (size_t n; f != nullptr && (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
    if (f != nullptr) std::fclose(f);
  }
  pclose(p);
  std::remove(script_path);
  std::remove(out_path.c_str());
  return out;
}

// The remote script reads RemoteInput and exports each variable as it was.
TEST(Job, RemoteShellRestoresTheVariables) {
  const std::string value = "line1\nline2 %d \\n 'q' \"dq\" $HOME `x` -v";
  JobSpec spec;
  spec.placements = {{0, "hora-test-remote-host", 0, 1, 0, 1}};
  spec.command = {"sh", "-c", "printf '%s|%s|%s' \"$V\" \"$HORA_RANK\" \"$HORA_SECRET\""};
  spec.env = {{"HORA_SECRET", "S3CR3T-x9"}, {"V", value}};
  spec.remote_env = {{"V", "loses to env"}};
  spec.rsh = {"a-local-wrapper"};  // its command line: wrapper HOST sh -c SCRIPT
  const RankLaunch launch = PlanRankLaunch(spec, spec.placements[0], "/");
  ASSERT_TRUE(launch.input.has_value());
  for (const std::string& a : launch.argv) {
    EXPECT_EQ(a.find("S3CR3T"), std::string::npos) << "the secret on the command line: " << a;
    EXPECT_EQ(a.find("line1"), std::string::npos) << "a variable on the command line: " << a;
  }
  const std::string want = value + "|0|S3CR3T-x9";
  EXPECT_EQ(RunAsARemoteHost(launch, want.size()), want);
}

// A user's variables named like the script's own (its loop's l, n, v; the
// rank's p, g; s, w, rc, stopped) reach the rank unchanged.
TEST(Job, RemoteShellKeepsVariablesNamedLikeItsOwn) {
  JobSpec spec;
  spec.placements = {{0, "hora-test-remote-host", 0, 1, 0, 1}};
  std::string print = "printf '%s'";
  std::string want;
  for (const char* name : {"l", "n", "v", "p", "g", "s", "w", "rc", "stopped", "stop"}) {
    spec.env[name] = std::string("user ") + name;
    print += std::string(" \"$") + name + "|\"";
    want += std::string("user ") + name + "|";
  }
  spec.env["HORA_SECRET"] = "s";
  spec.command = {"sh", "-c", print};
  spec.rsh = {"a-local-wrapper"};
  const RankLaunch launch = PlanRankLaunch(spec, spec.placements[0], "/");
  ASSERT_TRUE(launch.input.has_value());
  EXPECT_EQ(RunAsARemoteHost(launch, want.size()), want);
}

// An elastic worker starts with its id and, given one, the place it would
// have if every live worker came (Horovod's variables at spawn).
TEST(Job, AnElasticWorkerStartsWithItsProspectivePlace) {
  JobSpec spec;
  spec.elastic.emplace();
  spec.command = {"true"};
  const Placement id{7, "localhost", 0, 0, 0, 0};  // (its id: localhost/7)
  auto has = [](const RankLaunch& l, const std::string& kv) {
    return std::find(l.envs.begin(), l.envs.end(), kv) != l.envs.end();
  };
  const RankLaunch bare = PlanRankLaunch(spec, id, "/");
  EXPECT_TRUE(has(bare, "HORA_WORKER_ID=localhost/7"));
  EXPECT_FALSE(has(bare, "HOROVOD_RANK=7")) << "an id is no rank";
  const RankLaunch placed =
      PlanRankLaunch(spec, id, "/", ProspectivePlace{{2, "localhost", 1, 2, 0, 1}, 3});
  for (const char* kv : {"HORA_WORKER_ID=localhost/7", "HOROVOD_RANK=2", "HORA_RANK=2",
                         "HOROVOD_SIZE=3", "HOROVOD_LOCAL_RANK=1", "HOROVOD_LOCAL_SIZE=2",
                         "HOROVOD_CROSS_RANK=0", "HOROVOD_CROSS_SIZE=1"}) {
    EXPECT_TRUE(has(placed, kv)) << kv;
  }
}

}  // namespace
}  // namespace hora::horarun
