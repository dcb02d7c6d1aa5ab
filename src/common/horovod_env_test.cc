// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/horovod_env.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>

#include "common/config.h"

namespace hora {
namespace {

bool Taken(const HorovodSettings& h, const std::string& line) {
  return std::find(h.taken.begin(), h.taken.end(), line) != h.taken.end();
}
bool Ignored(const HorovodSettings& h, const std::string& line) {
  return std::find(h.ignored.begin(), h.ignored.end(), line) != h.ignored.end();
}

TEST(HorovodEnv, SettingsWithAnEquivalentAreTakenOthersNamed) {
  const std::map<std::string, std::string> env = {
      {"HOROVOD_FUSION_THRESHOLD", "33554432"},
      {"HOROVOD_CYCLE_TIME", "3.5"},
      {"HOROVOD_LOG_LEVEL", "FATAL"},
      {"HOROVOD_TIMELINE", "DYNAMIC"},
      {"HOROVOD_CACHE_CAPACITY", "64"},
      {"HOROVOD_AUTOTUNE", "1"},
      {"HOROVOD_MPI_THREADS_DISABLE", "1"},
      {"HOROVOD_RANK", "3"},  // layout: neither taken nor named
      {"PATH", "/bin"}};
  const HorovodSettings h = ReadHorovodSettings(env, {{"HORA_CACHE_CAPACITY", "16"}});
  EXPECT_EQ(h.hora, (std::map<std::string, std::string>{{"HORA_AUTOTUNE", "1"},
                                                        {"HORA_CYCLE_TIME_MS", "3.5"},
                                                        {"HORA_FUSION_THRESHOLD_BYTES", "33554432"},
                                                        {"HORA_LOG_LEVEL", "error"}}));
  EXPECT_TRUE(Taken(h, "HOROVOD_AUTOTUNE=1 is taken as HORA_AUTOTUNE=1"));
  EXPECT_TRUE(Taken(h, "HOROVOD_CYCLE_TIME=3.5 is taken as HORA_CYCLE_TIME_MS=3.5"));
  EXPECT_TRUE(Ignored(h, "HOROVOD_CACHE_CAPACITY=64 is ignored: HORA_CACHE_CAPACITY is set"));
  EXPECT_TRUE(Taken(h, "HOROVOD_TIMELINE=DYNAMIC needs nothing in Hora"));
  EXPECT_TRUE(Ignored(h,
                      "HOROVOD_MPI_THREADS_DISABLE is ignored: Hora has no equivalent (horarun "
                      "--print-config lists Hora's settings)"));
  EXPECT_EQ(h.taken.size(), 5u);
  EXPECT_EQ(h.ignored.size(), 2u);
  // What is taken goes through the settings table like any value.
  std::map<std::string, std::string> hora = h.hora;
  auto config = ConfigFromEnv(hora);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->fusion_threshold_bytes, 33554432u);
  EXPECT_EQ(config->log_level, LogLevel::kError);
}

TEST(HorovodEnv, TheElasticTimeoutIsTakenAndTheElasticFlagIsLayout) {
  // horovodrun's --elastic-timeout default is HOROVOD_ELASTIC_TIMEOUT (a
  // user trial: Hora said it had no equivalent); HOROVOD_ELASTIC=1 is what
  // horarun's elastic mode sets for the workers, as horovodrun does.
  const HorovodSettings h =
      ReadHorovodSettings({{"HOROVOD_ELASTIC_TIMEOUT", "7"}, {"HOROVOD_ELASTIC", "1"}}, {});
  EXPECT_EQ(h.hora, (std::map<std::string, std::string>{{"HORA_ELASTIC_TIMEOUT_S", "7"}}));
  EXPECT_TRUE(Taken(h, "HOROVOD_ELASTIC_TIMEOUT=7 is taken as HORA_ELASTIC_TIMEOUT_S=7"));
  EXPECT_TRUE(h.ignored.empty()) << h.ignored[0];
  std::map<std::string, std::string> hora = h.hora;
  auto config = ConfigFromEnv(hora);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->elastic_timeout_s, 7.0);
}

TEST(HorovodEnv, ASettingHorarunTranslatedIsSaidTakenNotIgnored) {
  // horarun translates HOROVOD_CYCLE_TIME before it starts the ranks, which
  // then see both names with the same value.
  const HorovodSettings h =
      ReadHorovodSettings({{"HOROVOD_CYCLE_TIME", "2"}, {"HOROVOD_CACHE_CAPACITY", "64"}},
                          {{"HORA_CYCLE_TIME_MS", "2"}, {"HORA_CACHE_CAPACITY", "16"}});
  EXPECT_TRUE(h.hora.empty());
  EXPECT_TRUE(Taken(h, "HOROVOD_CYCLE_TIME=2 is taken as HORA_CYCLE_TIME_MS=2"));
  EXPECT_TRUE(Ignored(h, "HOROVOD_CACHE_CAPACITY=64 is ignored: HORA_CACHE_CAPACITY is set"));
}

// Horovod's flag turns its whole stall inspector off: the report and the
// shutdown (the shutdown stayed on, and a rank slow by more than
// HOROVOD_STALL_SHUTDOWN_TIME_SECONDS was stopped), as horarun's
// --no-stall-check does; 0 needs nothing, said once.
TEST(HorovodEnv, StallCheckDisableTurnsTheReportAndTheShutdownOff) {
  HorovodSettings h = ReadHorovodSettings(
      {{"HOROVOD_STALL_CHECK_DISABLE", "1"}, {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "5"}}, {});
  EXPECT_EQ(h.hora.at("HORA_STALL_WARNING_S"), "0");
  EXPECT_EQ(h.hora.at("HORA_STALL_SHUTDOWN_S"), "0");
  EXPECT_TRUE(Taken(h, "HOROVOD_STALL_CHECK_DISABLE=1 is taken as HORA_STALL_SHUTDOWN_S=0"));
  EXPECT_TRUE(Ignored(h,
                      "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=5 is ignored: "
                      "HOROVOD_STALL_CHECK_DISABLE=1 set HORA_STALL_SHUTDOWN_S=0"));
  // In a rank horarun started (it took them before): the same words, not
  // "HORA_STALL_SHUTDOWN_S is set", which the user never set.
  h = ReadHorovodSettings(
      {{"HOROVOD_STALL_CHECK_DISABLE", "1"}, {"HOROVOD_STALL_CHECK_TIME_SECONDS", "33"}},
      {{"HORA_STALL_WARNING_S", "0"}, {"HORA_STALL_SHUTDOWN_S", "0"}});
  EXPECT_TRUE(Ignored(h,
                      "HOROVOD_STALL_CHECK_TIME_SECONDS=33 is ignored: "
                      "HOROVOD_STALL_CHECK_DISABLE=1 set HORA_STALL_WARNING_S=0"))
      << h.ignored.size();
  h = ReadHorovodSettings({{"HOROVOD_STALL_CHECK_DISABLE", "0"}}, {});
  EXPECT_TRUE(h.hora.empty());
  EXPECT_EQ(h.taken,
            std::vector<std::string>{"HOROVOD_STALL_CHECK_DISABLE=0 needs nothing in Hora"});
  // Beside a stall time horarun took: still nothing to do, and not "ignored"
  // (it said both before).
  h = ReadHorovodSettings(
      {{"HOROVOD_STALL_CHECK_DISABLE", "0"}, {"HOROVOD_STALL_CHECK_TIME_SECONDS", "2"}},
      {{"HORA_STALL_WARNING_S", "2"}});
  EXPECT_TRUE(h.ignored.empty()) << h.ignored.front();
  EXPECT_TRUE(Taken(h, "HOROVOD_STALL_CHECK_DISABLE=0 needs nothing in Hora"));
  EXPECT_TRUE(Taken(h, "HOROVOD_STALL_CHECK_TIME_SECONDS=2 is taken as HORA_STALL_WARNING_S=2"));
}

// Hora's log lines carry no time: hiding it needs nothing; showing it is
// ignored, saying why.
TEST(HorovodEnv, HidingTheLogsTimeNeedsNothing) {
  HorovodSettings h = ReadHorovodSettings({{"HOROVOD_LOG_HIDE_TIME", "1"}}, {});
  EXPECT_TRUE(h.ignored.empty()) << h.ignored.front();
  EXPECT_TRUE(Taken(h,
                    "HOROVOD_LOG_HIDE_TIME=1 needs nothing in Hora: Hora's log lines carry "
                    "no time"));
  h = ReadHorovodSettings({{"HOROVOD_LOG_HIDE_TIME", "0"}}, {});
  EXPECT_TRUE(Ignored(h, "HOROVOD_LOG_HIDE_TIME=0 is ignored: Hora's log lines carry no time"));
}

TEST(HorovodEnv, TheSecondNameOfOneSettingIsSaidIgnored) {
  // Both set HORA_STALL_WARNING_S: the first by name is taken, the other is
  // named (it was dropped without a word).
  const HorovodSettings h = ReadHorovodSettings(
      {{"HOROVOD_STALL_CHECK_DISABLE", "1"}, {"HOROVOD_STALL_CHECK_TIME_SECONDS", "30"}}, {});
  EXPECT_EQ(h.hora.at("HORA_STALL_WARNING_S"), "0");
  EXPECT_TRUE(Ignored(h,
                      "HOROVOD_STALL_CHECK_TIME_SECONDS=30 is ignored: "
                      "HOROVOD_STALL_CHECK_DISABLE=1 set HORA_STALL_WARNING_S=0"));
  EXPECT_EQ(h.ignored.size(), 1u);
}

// A value that does not parse is named by the variable the user set.
TEST(HorovodEnv, ABadValueIsNamedByTheHorovodVariable) {
  for (const bool horarun_took_it : {false, true}) {
    std::map<std::string, std::string> hora;
    if (horarun_took_it) hora["HORA_FUSION_THRESHOLD_BYTES"] = "abc";
    const HorovodSettings h = ReadHorovodSettings({{"HOROVOD_FUSION_THRESHOLD", "abc"}}, hora);
    for (const auto& [k, v] : h.hora) hora.emplace(k, v);
    const Result<Config> config = ConfigFromEnv(hora);
    ASSERT_FALSE(config.ok());
    const std::string said = InHorovodsNames(config.status(), h).message();
    EXPECT_EQ(said.rfind("HOROVOD_FUSION_THRESHOLD='abc' (taken as "
                         "HORA_FUSION_THRESHOLD_BYTES='abc') is invalid: expected a byte count",
                         0),
              0u)
        << said;
  }
  // The user's value as set (a quote in it too), beside the one taken.
  for (const auto& [name, value, want] : std::vector<std::array<std::string, 3>>{
           {"HOROVOD_CYCLE_TIME", "1'5",
            "HOROVOD_CYCLE_TIME='1'5' (taken as HORA_CYCLE_TIME_MS='1'5') is invalid: "},
           {"HOROVOD_LOG_LEVEL", "Loud",
            "HOROVOD_LOG_LEVEL='Loud' (taken as HORA_LOG_LEVEL='loud') is invalid: "}}) {
    const HorovodSettings h = ReadHorovodSettings({{name, value}}, {});
    std::map<std::string, std::string> env = h.hora;
    const Result<Config> config = ConfigFromEnv(env);
    ASSERT_FALSE(config.ok()) << name;
    const std::string said = InHorovodsNames(config.status(), h).message();
    EXPECT_EQ(said.rfind(want, 0), 0u) << said;
  }
  // A HORA_* setting the user set is named as it is.
  const HorovodSettings none = ReadHorovodSettings({}, {});
  const Status st = InvalidArgument("HORA_CYCLE_TIME_MS='x' is invalid: expected a number");
  EXPECT_EQ(InHorovodsNames(st, none).message(), st.message());
}

}  // namespace
}  // namespace hora
