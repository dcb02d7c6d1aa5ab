// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "options.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/config.h"
#include "flags.h"

namespace hora::horarun {
namespace {

// Files the tests "read": a config file and a hostfile.
std::map<std::string, std::string>& Files() {
  static std::map<std::string, std::string> files;
  return files;
}

Result<std::string> FakeFile(const std::string& path) {
  auto it = Files().find(path);
  if (it == Files().end()) return InvalidArgument("No such file or directory");
  return it->second;
}

Result<Options> Parse(std::vector<std::string> args) {
  args.push_back("./a");
  return ParseOptions(args, &FakeFile);
}

std::string ErrorOf(std::vector<std::string> args) {
  auto o = Parse(std::move(args));
  return o.ok() ? "(no error)" : o.status().message();
}

TEST(Options, TunablesBecomeSettings) {
  auto o = Parse({"-np",
                  "2",
                  "--fusion-threshold-mb",
                  "32",
                  "--cycle-time-ms",
                  "2.5",
                  "--cache-capacity",
                  "0",
                  "--timeline-filename",
                  "/tmp/t.json",
                  "--stall-check-warning-time-seconds",
                  "30",
                  "--stall-check-shutdown-time-seconds=90",
                  "--log-level",
                  "FATAL",
                  "--network-interfaces",
                  "eth0,eth1",
                  "--network-interface",
                  "ib0",
                  "--start-timeout",
                  "7",
                  "--no-hierarchical-allreduce",
                  "--no-autotune",
                  "--disable-cache",
                  "--tcp"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  const std::map<std::string, std::string> want = {
      {"HORA_FUSION_THRESHOLD_BYTES", "33554432"},
      {"HORA_CYCLE_TIME_MS", "2.5"},
      {"HORA_CACHE_CAPACITY", "0"},
      {"HORA_TIMELINE", "/tmp/t.json"},
      {"HORA_STALL_WARNING_S", "30"},
      {"HORA_STALL_SHUTDOWN_S", "90"},
      {"HORA_LOG_LEVEL", "error"},
      {"HORA_IFACE", "eth0"},
      {"NCCL_SOCKET_IFNAME", "eth0,eth1,ib0"},
      {"HORA_START_TIMEOUT_S", "7.000000"},
      {"HORA_HIERARCHICAL_ALLREDUCE", "0"},
      {"HORA_AUTOTUNE", "0"},
      {"NCCL_IB_DISABLE", "1"},
  };
  EXPECT_EQ(o->settings, want);
  EXPECT_EQ(o->command, std::vector<std::string>{"./a"});
}

TEST(Options, HierarchicalAllreduceIsASetting) {
  auto on = Parse({"-np", "4", "-H", "a:2,b:2", "--hierarchical-allreduce", "./a"});
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  EXPECT_EQ(on->settings.at("HORA_HIERARCHICAL_ALLREDUCE"), "1");
  auto off = Parse({"-np", "4", "--no-hierarchical-allreduce", "./a"});
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(off->settings.at("HORA_HIERARCHICAL_ALLREDUCE"), "0");
}

TEST(Options, NoStallCheckWinsOverTheTimes) {
  auto o = Parse({"-np", "1", "--stall-check-warning-time-seconds", "30", "--no-stall-check"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->settings.at("HORA_STALL_WARNING_S"), "0");
  EXPECT_EQ(o->settings.at("HORA_STALL_SHUTDOWN_S"), "0");
}

TEST(Options, HorovodrunsLaunchFlags) {
  auto o = Parse({"--num-proc", "3", "-H", "localhost:4", "--gloo", "-x", "A", "-x", "B=1=2", "-p",
                  "2222", "-i", "/k/id", "--output-filename", "out", "--verbose"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->np, 3);
  EXPECT_FALSE(o->mpi);
  EXPECT_EQ(o->exports, (std::vector<std::string>{"A", "B=1=2"}));
  EXPECT_EQ(o->output_dir, "out");
  EXPECT_TRUE(o->verbose);
  const std::vector<std::string> rsh = {
      "ssh",  "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new", "-p",
      "2222", "-i", "/k/id"};
  EXPECT_EQ(o->rsh, rsh);
  Files()["hosts"] = "localhost slots=2\n";
  o = Parse({"-hostfile", "hosts", "--mpi"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->np, 2);
  EXPECT_TRUE(o->mpi);
  for (const char* flag : {"-v", "--version", "-cb", "--check-build"}) {
    auto info = ParseOptions({flag}, &FakeFile);  // no -np, no command: still fine
    ASSERT_TRUE(info.ok()) << flag;
    EXPECT_TRUE(info->version || info->check_build) << flag;
  }
}

// As horovodrun's argparse: a long option may be shortened to a prefix of
// one option's names; a prefix of several is an error naming them.
TEST(Options, AnUnambiguousPrefixNamesALongOption) {
  auto o = Parse({"-np", "2", "--fusion-threshold", "32", "--cycle-time=2.5", "--network-interface",
                  "ib0", "--start-timeo", "7"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->settings.at("HORA_FUSION_THRESHOLD_BYTES"), "33554432");
  EXPECT_EQ(o->settings.at("HORA_CYCLE_TIME_MS"), "2.5");
  EXPECT_EQ(o->settings.at("HORA_IFACE"), "ib0");
  EXPECT_EQ(o->settings.at("HORA_START_TIMEOUT_S"), "7.000000");
  const std::string ambiguous = ErrorOf({"-np", "2", "--cy", "1", "--c", "8"});
  EXPECT_EQ(ambiguous,
            "ambiguous option '--c': it could be --config-file, --check-build, --cycle-time-ms, "
            "--cache-capacity")
      << ambiguous;
  EXPECT_EQ(ParseOptions({"-np", "2", "--fusion-thr"}, &FakeFile).status().message(),
            "--fusion-threshold-mb needs a value")
      << "errors name the whole flag";
  EXPECT_EQ(ErrorOf({"-np", "2", "-fusion", "1"}).rfind("unknown option '-fusion'", 0), 0u)
      << "short options are not abbreviated";
}

TEST(Options, HorovodrunsNegationsOfWhatHoraLacksAreAccepted) {
  // (Each asks for Horovod's default, which is what Hora does.)
  for (const char* flag : {"--no-timeline-mark-cycles", "--no-mpi-threads-disable",
                           "--no-hierarchical-allgather", "--no-torus-allreduce"}) {
    auto o = Parse({"-np", "2", flag, "./a"});
    ASSERT_TRUE(o.ok()) << flag << ": " << o.status().ToString();
    EXPECT_TRUE(o->settings.empty()) << flag;
  }
}

TEST(Options, ElasticBoundsDefaultToNp) {
  auto o = Parse({"-np", "3", "--min-np", "2", "--elastic-timeout", "7.5", "--reset-limit", "4"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->elastic());
  EXPECT_EQ(o->min_np, 2);
  EXPECT_EQ(o->max_np, 3);
  EXPECT_EQ(o->elastic_timeout_s, 7.5);
  // (A setting too: the flag wins over HORA_ELASTIC_TIMEOUT_S and
  // HOROVOD_ELASTIC_TIMEOUT, which give the timeout without it.)
  EXPECT_EQ(o->settings.at("HORA_ELASTIC_TIMEOUT_S"), "7.5");
  EXPECT_EQ(o->reset_limit, 4);
  o = Parse({"-np", "2", "--max-np", "5"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->min_np, 2);
  EXPECT_EQ(o->max_np, 5);
  o = Parse({"-np", "2"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_FALSE(o->elastic());
  // A discovery script alone is elastic mode, bounded by -np.
  o = Parse({"-np", "2", "--host-discovery-script", "d.sh", "--slots-per-host", "4"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->elastic());
  EXPECT_EQ(o->discovery_script, "d.sh");
  EXPECT_EQ(o->slots_per_host, 4);
  EXPECT_EQ(o->min_np, 2);
  EXPECT_EQ(o->max_np, 2);
  EXPECT_TRUE(o->hosts.empty()) << "the hosts come from the script";
  o = Parse(
      {"-np", "2", "--host-discovery-script", "d.sh", "--blacklist-cooldown-range", "1.5", "60"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->blacklist_cooldown_s, (std::pair<double, double>{1.5, 60}));
}

// Horovod takes 0 (its value under XLA: no wait between cycles); Hora's
// engine takes it as its shortest cycle.
TEST(Options, CycleTimeZeroIsAccepted) {
  auto o = Parse({"-np", "2", "--cycle-time-ms", "0", "x"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->settings.at("HORA_CYCLE_TIME_MS"), "0");
  auto config = ConfigFromEnv({{"HORA_CYCLE_TIME_MS", "0"}});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->cycle_time_ms, 0.0);
}

TEST(Options, BadValuesAndRefusedFlagsAreClearErrors) {
  struct Case {
    std::vector<std::string> args;
    const char* error;
  } cases[] = {
      {{"-np", "2", "--fusion-threshold-mb", "-1"},
       "--fusion-threshold-mb '-1' is not a whole number of MiB, 0 or more"},
      {{"-np", "2", "--cycle-time-ms", "-2"}, "--cycle-time-ms '-2' is not a number, 0 or more"},
      {{"-np", "2", "--cache-capacity", "-5"}, "--cache-capacity '-5' is not a whole number"},
      {{"-np", "2", "--stall-check-warning-time-seconds", "-1"},
       "--stall-check-warning-time-seconds '-1' is not a number, 0 or more"},
      {{"-np", "2", "--log-level", "LOUD"},
       "--log-level 'LOUD' is not one of TRACE, DEBUG, INFO, WARNING, ERROR, FATAL"},
      {{"-np", "2", "--ssh-port", "0"}, "--ssh-port '0' is not a port (1 to 65535)"},
      {{"-np", "2", "--min-np", "3", "x"},
       "elastic mode needs --min-np <= -np <= --max-np (got 3, 2, 3)"},
      {{"-np", "4", "--max-np", "3", "x"},
       "elastic mode needs --min-np <= -np <= --max-np (got 3, 4, 3)"},
      {{"-np", "2", "--min-np", "0"}, "--min-np '0' is not a process count"},
      {{"-np", "2", "--min-np", "1", "--mpi", "x"}, "elastic mode starts its workers itself"},
      {{"-np", "2", "--reset-limit", "-1"}, "--reset-limit '-1' is not a count"},
      {{"-np", "2", "--host-discovery-script", "d.sh", "-H", "a:2", "x"},
       "give either --host-discovery-script or -H/--hostfile, not both"},
      {{"--host-discovery-script", "d.sh", "x"}, "-np is required (how many workers to start)"},
      {{"-np", "2", "--host-discovery-script", "d.sh", "--max-np", "1", "x"},
       "elastic mode needs --min-np <= -np <= --max-np (got 1, 2, 1)"},
      {{"-np", "2", "--slots-per-host", "0"}, "--slots-per-host '0' is not a slot count"},
      {{"-np", "2", "--slots-per-host", "2", "x"},
       "--slots-per-host needs --host-discovery-script"},
      {{"-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "1", "2", "x"},
       "--blacklist-cooldown-range needs --host-discovery-script"},
      {{"-np", "2", "--blacklist-cooldown-range", "3", "2"},
       "--blacklist-cooldown-range '3 2': MIN is above MAX"},
      {{"-np", "2", "--blacklist-cooldown-range"}, "--blacklist-cooldown-range needs two values"},
      {{"-np", "2", "--autotune-bayes-opt-max-samples", "9"},
       "--autotune-bayes-opt-max-samples: Hora's autotuning is not Bayesian"},
      {{"-np", "2", "--autotune-steps-per-sample", "0"},
       "--autotune-steps-per-sample '0' is not a whole number, 1 or more"},
      {{"-np", "2", "--autotune-log-file", ""}, "--autotune-log-file '' is not a file name"},
      {{"-np", "2", "--hierarchical-allgather"},
       "--hierarchical-allgather: Hora has no hierarchical allgather"},
      {{"-np", "2", "--timeline-mark-cycles"},
       "--timeline-mark-cycles: Hora's timeline does not mark engine cycles yet"},
      {{"-np", "2", "--gloo", "--mpi"}, "--mpi: --gloo and --mpi exclude each other"},
      {{"-np", "2", "--gloo", "--transport", "mpi"}, "--gloo starts the ranks with horarun"},
      {{"-np", "2", "--rsh", "rsh", "-p", "22"},
       "--ssh-port and --ssh-identity-file are ssh's options, but --rsh 'rsh' is not ssh"},
      {{"-np", "2", "--mpi", "--rsh", "rsh"}, "--rsh is not passed to mpirun yet"},
      {{"-np", "2", "--mpi", "-p", "2222"}, "--ssh-port (-p) is not passed to mpirun yet"},
      {{"-np", "2", "--mpi", "-i", "/k/id"}, "--ssh-identity-file (-i) is not passed"},
      {{"-np", "2", "--transport", "mpi", "--stop-grace", "3"},
       "--stop-grace is not passed to mpirun yet"},
      {{"-np", "2", "--mpirun", "mpirun.mpich", "--stop-grace", "3"},
       "--stop-grace is not passed to mpirun yet"},
      {{"-np", "2", "-x", "1A"}, "-x '1A' does not start with a variable name"},
      {{"-np", "2", "--verbose=yes"}, "--verbose takes no value"},
      {{"-np", "2", "--frobnicate"}, "unknown option '--frobnicate'"},
      {{"-np", "2", "--config-file", "nowhere.yaml"},
       "--config-file 'nowhere.yaml': No such file or directory"},
      {{"-np", "2", "--hostfile", "nowhere"}, "--hostfile 'nowhere': No such file or directory"},
  };
  for (const Case& c : cases) {
    const std::string error = ErrorOf(c.args);
    EXPECT_EQ(error.rfind(c.error, 0), 0u) << "args: " << c.args.back() << "\nerror: " << error;
  }
}

TEST(Options, ConfigFileGivesFlagsThatTheCommandLineOverrides) {
  Files()["c.yaml"] =
      "controller: gloo\n"
      "params:\n"
      "  fusion_threshold_mb: 16\n"
      "  cycle_time_ms: 3\n"
      "  cache_capacity: 512\n"
      "  hierarchical_allreduce: false\n"
      "autotune:\n"
      "  enabled: false\n"
      "  log_file: /tmp/at.csv   # only with autotune on\n"
      "timeline:\n"
      "  filename: /tmp/tl.json\n"
      "  mark_cycles: false\n"
      "stall_check:\n"
      "  enabled: true\n"
      "  warning_time_seconds: 11\n"
      "logging:\n"
      "  level: DEBUG\n"
      "  with_timestamp: false\n";
  // The command line wins whether it comes before or after --config-file.
  for (auto args : std::vector<std::vector<std::string>>{
           {"-np", "1", "--cycle-time-ms", "9", "--config-file", "c.yaml", "--log-level", "INFO"},
           {"-np", "1", "--log-level", "INFO", "--config-file", "c.yaml", "--cycle-time-ms",
            "9"}}) {
    auto o = Parse(args);
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    const std::map<std::string, std::string> want = {
        {"HORA_FUSION_THRESHOLD_BYTES", "16777216"},
        {"HORA_CYCLE_TIME_MS", "9"},
        {"HORA_CACHE_CAPACITY", "512"},
        {"HORA_TIMELINE", "/tmp/tl.json"},
        {"HORA_STALL_WARNING_S", "11"},
        {"HORA_LOG_LEVEL", "info"},
        {"HORA_HIERARCHICAL_ALLREDUCE", "0"},
        {"HORA_AUTOTUNE", "0"},
    };
    EXPECT_EQ(o->settings, want);
    EXPECT_EQ(o->controller, "gloo");
  }
  // autotune.enabled: true brings its other keys along.
  Files()["a.yaml"] =
      "autotune:\n  enabled: true\n  log_file: at.csv\n  warmup_samples: 0\n"
      "  steps_per_sample: 4\n";
  auto a = Parse({"-np", "1", "--config-file", "a.yaml"});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->settings, (std::map<std::string, std::string>{
                             {"HORA_AUTOTUNE", "1"},
                             {"HORA_AUTOTUNE_LOG", "at.csv"},
                             {"HORA_AUTOTUNE_WARMUP_SAMPLES", "0"},
                             {"HORA_AUTOTUNE_STEPS_PER_SAMPLE", "4"},
                         }));
  // controller: mpi yields to --gloo; stall_check.enabled: false to --stall-check.
  Files()["m.yaml"] = "controller: mpi\nstall_check:\n  enabled: false\n";
  auto o = Parse({"-np", "1", "--gloo", "--stall-check", "--config-file", "m.yaml"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_FALSE(o->mpi);
  EXPECT_EQ(o->settings.count("HORA_STALL_WARNING_S"), 0u);
  o = Parse({"-np", "1", "--config-file", "m.yaml"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->mpi);
  EXPECT_EQ(o->settings.at("HORA_STALL_WARNING_S"), "0");
  // MPI from the file: horarun's own start flags are refused as with --mpi.
  auto refused = Parse({"-np", "1", "--rsh", "rsh", "--config-file", "m.yaml"});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--rsh is not passed to mpirun yet"), std::string::npos)
      << refused.status().message();
}

TEST(Options, ConfigFileErrorsNameTheLine) {
  Files()["bad1.yaml"] = "params:\n  cycle_time_ms: -1\n";
  Files()["bad2.yaml"] = "params:\n  fusion_mb: 1\n";
  Files()["bad3.yaml"] = "autotune:\n  enabled: true\n  gaussian_process_noise: 0.5\n";
  Files()["bad4.yaml"] = "controller: jsrun\n";
  Files()["bad5.yaml"] = "params:\n  - 1\n";
  Files()["bad6.yaml"] = "timeline:\n  mark_cycles: maybe\n";
  EXPECT_EQ(ErrorOf({"-np", "1", "--config-file", "bad1.yaml"}),
            "bad1.yaml:2 (params.cycle_time_ms): --cycle-time-ms '-1' is not a number, 0 or more");
  EXPECT_EQ(ErrorOf({"-np", "1", "--config-file", "bad3.yaml"})
                .rfind("bad3.yaml:3 (autotune.gaussian_process_noise): "
                       "--autotune-gaussian-process-noise: Hora's autotuning is not Bayesian",
                       0),
            0u);
  EXPECT_EQ(ErrorOf({"-np", "1", "--config-file", "bad4.yaml"}),
            "bad4.yaml:1 (controller): expected gloo or mpi");
  EXPECT_EQ(ErrorOf({"-np", "1", "--config-file", "bad5.yaml"}).rfind("bad5.yaml:2: sequences", 0),
            0u);
  EXPECT_EQ(ErrorOf({"-np", "1", "--config-file", "bad6.yaml"}),
            "bad6.yaml:2 (timeline.mark_cycles): expected true or false, got 'maybe'");
}

// horovodrun ignores keys it does not know (a newer or older Horovod's):
// so does horarun, saying so, file and line.
TEST(Options, ConfigFileUnknownKeysAreIgnoredWithANotice) {
  Files()["old.yaml"] =
      "params:\n  fusion_mb: 1\n  cycle_time_ms: 2\nlogging:\n  hide_timestamp: true\n"
      "extra: 1\n";
  auto o = Parse({"-np", "1", "--config-file", "old.yaml"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->settings.at("HORA_CYCLE_TIME_MS"), "2");
  EXPECT_EQ(o->notices,
            (std::vector<std::string>{
                "old.yaml:2 (params.fusion_mb): unknown key, ignored (params has "
                "fusion_threshold_mb, cycle_time_ms, cache_capacity, hierarchical_allreduce, "
                "hierarchical_allgather, torus_allreduce)",
                "old.yaml:5 (logging.hide_timestamp): unknown key, ignored (logging has level, "
                "with_timestamp)",
                "old.yaml:6 (extra): unknown key, ignored (horovodrun's are controller, params, "
                "autotune, timeline, stall_check, library_options, logging)"}));
}

TEST(Options, HelpListsEveryFlag) {
  const std::string help = Usage();
  EXPECT_EQ(help.rfind("usage: horarun", 0), 0u);
  size_t count = 0;
  for (const FlagSpec& f : Flags()) {
    std::string names = f.names;
    for (size_t p = 0; p <= names.size();) {
      size_t q = names.find('|', p);
      if (q == std::string::npos) q = names.size();
      const std::string name = names.substr(p, q - p);
      p = q + 1;
      ++count;
      EXPECT_NE(help.find(" " + name), std::string::npos) << name;
      EXPECT_EQ(FindFlag(name), &f) << name;
    }
  }
  EXPECT_GE(count, 80u);  // horovodrun's flags and Hora's own
}

}  // namespace
}  // namespace hora::horarun
