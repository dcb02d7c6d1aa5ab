// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Autotuning (HORA_AUTOTUNE) in running engines, ranks as threads: a job
// of training steps (six allreduces a step, 1 to 100K elements) runs while
// the first rank's tuner tries fusion thresholds, cycle times and the
// response cache off and on again, and every rank takes each of its
// settings at the same cycle:
//  - every step's sums are the ones computed here, on every rank, through
//    every switch (the cache emptied and refilled, fusion re-planned);
//  - every rank took the same number of settings, and the tuner finished;
//  - the CSV log holds the header, the samples, and the choice last;
//  - with autotuning off, no settings are taken and no log is written.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "support/thread_ranks.h"

namespace hora {
namespace {

using testing::ExpectAllOk;
using testing::TestSettings;
using testing::ThreadRanks;

constexpr auto kWait = std::chrono::seconds(60);
constexpr int64_t kSizes[] = {1, 7, 1000, 4099, 65537, 100003};

float Value(int r, int64_t k, int step) { return static_cast<float>((r + 1) * ((k + step) % 13)); }

// Runs `steps` steps; fails on any wrong sum.
Status Train(int rank, int n, Session& s, int steps) {
  std::vector<std::vector<float>> bufs;
  for (int64_t size : kSizes) bufs.emplace_back(static_cast<size_t>(size));
  for (int step = 0; step < steps; ++step) {
    std::vector<Handle> hs;
    for (size_t t = 0; t < bufs.size(); ++t) {
      for (size_t k = 0; k < bufs[t].size(); ++k)
        bufs[t][k] = Value(rank, static_cast<int64_t>(k), step);
      TensorView v(bufs[t].data(), DataType::kFloat32, {kSizes[t]});
      hs.push_back(s.AllreduceAsync("g" + std::to_string(t), v, v));
    }
    for (size_t t = 0; t < bufs.size(); ++t) {
      HORA_RETURN_IF_ERROR(hs[t].Wait(kWait));
      for (size_t k = 0; k < bufs[t].size(); ++k) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += Value(r, static_cast<int64_t>(k), step);
        if (bufs[t][k] != want) {
          return InternalError("step " + std::to_string(step) + ", tensor g" + std::to_string(t) +
                               "[" + std::to_string(k) + "] is " + std::to_string(bufs[t][k]) +
                               ", expected " + std::to_string(want));
        }
      }
    }
  }
  return Status::Ok();
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

class EngineAutotune : public ::testing::TestWithParam<int> {};

TEST_P(EngineAutotune, EveryRankTakesTheSettingsAndTheSumsStayRight) {
  const int n = GetParam();
  const std::string log = ::testing::TempDir() + "autotune_np" + std::to_string(n) + ".csv";
  std::remove(log.c_str());
  std::vector<uint64_t> taken(static_cast<size_t>(n));
  {
    ThreadRanks ranks(n, TestSettings({{"HORA_AUTOTUNE", "1"},
                                       {"HORA_AUTOTUNE_LOG", log},
                                       {"HORA_AUTOTUNE_WARMUP_SAMPLES", "1"},
                                       {"HORA_AUTOTUNE_STEPS_PER_SAMPLE", "2"}}));
    ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
      // Enough steps for the whole search: about 4 steps a sample (one
      // left out, two scored, the switch), at most 1 + 1 + 4 + 4 + 1 + 3 x 2
      // samples.
      HORA_RETURN_IF_ERROR(Train(rank, n, s, 120));
      taken[static_cast<size_t>(rank)] = s.engine_counters().settings_taken;
      return Status::Ok();
    }));
  }
  for (int r = 1; r < n; ++r) EXPECT_EQ(taken[static_cast<size_t>(r)], taken[0]) << "rank " << r;
  // The other fusion thresholds, cycle times, the cache off: at least 9
  // switches.
  EXPECT_GE(taken[0], 9u);
  const std::vector<std::string> lines = Lines(log);
  ASSERT_GE(lines.size(), 13u);
  EXPECT_EQ(lines.front().rfind("sample,phase,fusion_threshold_bytes,", 0), 0u);
  EXPECT_NE(lines[1].find(",warmup,"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find(",start,"), std::string::npos) << lines[2];
  EXPECT_NE(lines.back().find(",chosen,"), std::string::npos) << lines.back();
  // Some sample ran with the cache off, and the job went on.
  bool cache_off = false;
  for (const std::string& l : lines) cache_off = cache_off || l.find(",0,\"") != std::string::npos;
  EXPECT_TRUE(cache_off);
  std::remove(log.c_str());
}

INSTANTIATE_TEST_SUITE_P(Worlds, EngineAutotune, ::testing::Values(2, 3));

TEST(EngineAutotuneOff, TakesNoSettingsAndWritesNoLog) {
  const std::string log = ::testing::TempDir() + "autotune_off.csv";
  std::remove(log.c_str());
  ThreadRanks ranks(2, TestSettings({{"HORA_AUTOTUNE_LOG", log}}));
  ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
    HORA_RETURN_IF_ERROR(Train(rank, 2, s, 20));
    if (s.engine_counters().settings_taken != 0) return InternalError("settings taken");
    return Status::Ok();
  }));
  EXPECT_FALSE(std::ifstream(log).good());
}

// A job of unnamed collectives (a name new each call) is never scored: the
// first rank says so once, instead of tuning nothing without a word. A job
// that broadcasts its parameters unnamed at the start (1200 here) and then
// trains with names is tuned, and nothing is said. (The warning's time,
// 60 s by default, is a millisecond here; Autotuner's test shows that a
// first step of more than 10,000 tensors waits for it.)
TEST(EngineAutotuneUnnamed, SaysNothingIsTunedOnceAndOnlyThen) {
  const std::string unnamed = " s finished, most of them unnamed, and no step was found";
  const std::string renamed = " s finished, named, and no name came twice";
  enum Job { kUnnamed, kStepNumbers, kNamedSteps };
  for (const Job job : {kUnnamed, kStepNumbers, kNamedSteps}) {
    ThreadRanks ranks(2, TestSettings({{"HORA_AUTOTUNE", "1"},
                                       {"HORA_AUTOTUNE_WARMUP_SAMPLES", "1"},
                                       {"HORA_AUTOTUNE_STEPS_PER_SAMPLE", "2"},
                                       {"HORA_AUTOTUNE_NO_STEP_WARN_S", "0.001"},
                                       {"HORA_LOG_LEVEL", "warning"}}));
    ::testing::internal::CaptureStderr();
    ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
      float x = 1.0f;
      TensorView v(&x, DataType::kFloat32, {1});
      switch (job) {
        case kNamedSteps:
          // Start-up broadcasts, unnamed, then steps of named tensors: tuned, no warning.
          for (int i = 0; i < 1200; ++i) {
            HORA_RETURN_IF_ERROR(s.BroadcastAsync("", v, 0).Wait(kWait));
          }
          HORA_RETURN_IF_ERROR(Train(rank, 2, s, 12));
          if (s.engine_counters().settings_taken == 0) return InternalError("nothing tuned");
          return Status::Ok();
        case kStepNumbers:
          // Named, but each step's names new (the start-up broadcasts unnamed before).
          for (int i = 0; i < 300; ++i) {
            HORA_RETURN_IF_ERROR(s.BroadcastAsync("", v, 0).Wait(kWait));
          }
          for (int i = 0; i < 10100; ++i) {
            HORA_RETURN_IF_ERROR(
                s.AllreduceAsync("step." + std::to_string(i) + ".loss", v, v).Wait(kWait));
          }
          return Status::Ok();
        case kUnnamed:
          for (int i = 0; i < 10100; ++i) {
            HORA_RETURN_IF_ERROR(s.AllreduceAsync("", v, v).Wait(kWait));
          }
          return Status::Ok();
      }
      return Status::Ok();
    }));
    const std::string err = ::testing::internal::GetCapturedStderr();
    const size_t at_unnamed = err.find(unnamed);
    const size_t at_renamed = err.find(renamed);
    EXPECT_EQ(at_unnamed == std::string::npos, job != kUnnamed) << job << err;
    EXPECT_EQ(at_renamed == std::string::npos, job != kStepNumbers) << job << err;
    if (job == kStepNumbers) {
      EXPECT_NE(err.find("(the last 'step."), std::string::npos) << err;
    }
    // (once)
    const size_t at = std::min(at_unnamed, at_renamed);
    if (at != std::string::npos) {
      EXPECT_EQ(err.find("autotuning: 10000 collectives", at + 1), std::string::npos) << err;
      EXPECT_NE(err.find("autotuning: 10000 collectives in "), std::string::npos) << err;
    }
  }
}

}  // namespace
}  // namespace hora
