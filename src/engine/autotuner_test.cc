// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The autotuner's search against a grid search, on jobs simulated here: a
// step of tensors whose time follows from the settings in force through a
// known throughput, with and without noise. The grid's best is computed
// here by scoring every combination of the space.
//  - without noise the search ends on the grid's best, for throughputs that
//    are separable and not;
//  - with 5% noise, over 200 seeded jobs, the chosen settings' throughput is
//    within 5% of the grid's best in at least 95% of them, never below 85%;
//  - every search takes fewer samples than the grid has combinations;
//  - the CSV log has its header, a line per sample and the choice last;
//  - steps are marked by the first name to come again (a one-off broadcast
//    first is passed over); a sample leaves out the step after a switch
//    and counts the bytes of its steps; a job whose names never come
//    again is never scored.
#include "engine/autotuner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace hora {
namespace {

using Throughput = std::function<double(const Tunables&)>;  // bytes per second

// Every combination of the space.
std::vector<Tunables> Grid(const TuningSpace& s, const Tunables& start) {
  std::vector<Tunables> out;
  for (uint64_t f : s.fusion_threshold_bytes)
    for (double c : s.cycle_time_ms)
      for (uint64_t k : s.cache_capacity)
        for (const std::string& a : s.allreduce_algo)
          for (Hierarchy h : s.hierarchy) {
            Tunables t = start;
            t.fusion_threshold_bytes = f;
            t.cycle_time_ms = c;
            t.cache_capacity = k;
            t.allreduce_algo = a;
            t.hierarchy = h;
            out.push_back(t);
          }
  return out;
}

double GridBest(const TuningSpace& s, const Tunables& start, const Throughput& f) {
  double best = 0;
  for (const Tunables& t : Grid(s, start)) best = std::max(best, f(t));
  return best;
}

struct Job {
  Tunables chosen;
  int samples = 0;
  int steps = 0;
  std::vector<std::string> log;
};

// Runs steps of `tensors` tensors of `bytes` each until the search is done
// (or `max_steps`): a step takes its bytes over `f` of the settings in
// force, times (1 + noise). A switch the tuner asks for lands at once.
Job RunJob(const AutotuneOptions& o, const Tunables& start, const TuningSpace& space,
           const Throughput& f, double noise, unsigned seed, int tensors = 20,
           uint64_t bytes = 1 << 20, int max_steps = 100000) {
  Job job;
  Autotuner tuner(o, start, space, [&](const std::string& l) { job.log.push_back(l); });
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-noise, noise);
  Tunables in_force = start;
  TimePoint now{};
  for (job.steps = 0; job.steps < max_steps && !tuner.done(); ++job.steps) {
    const double step_s = static_cast<double>(bytes) * tensors / f(in_force) * (1 + u(rng));
    for (int i = 0; i < tensors; ++i) {
      now += std::chrono::duration_cast<Duration>(std::chrono::duration<double>(step_s / tensors));
      if (auto next = tuner.Finished("t" + std::to_string(i), bytes, now)) in_force = *next;
    }
  }
  job.chosen = tuner.best();
  job.samples = tuner.samples();
  EXPECT_EQ(in_force, tuner.best()) << "the job ends on the choice";
  return job;
}

Tunables Start() {
  Tunables t;
  t.fusion_threshold_bytes = 128 << 20;
  t.cycle_time_ms = 1;
  t.cache_capacity = 1024;
  return t;
}

// Best at 16 MiB and 2.5 ms, cache on, rd up to 256K; each factor alone.
double Separable(const Tunables& t) {
  const double f = std::log2(static_cast<double>(t.fusion_threshold_bytes >> 20) + 1);
  const double c = std::log(t.cycle_time_ms);
  double s = 1e9 * (1.0 - 0.04 * (f - std::log2(17.0)) * (f - std::log2(17.0)));
  s *= 1.0 - 0.05 * (c - std::log(2.5)) * (c - std::log(2.5));
  s *= t.cache_capacity > 0 ? 1.0 : 0.7;
  s *= t.allreduce_algo == "rd:0-256K,ring:256K-" ? 1.1 : 1.0;
  s *= t.hierarchy == Hierarchy::kOn ? 1.2 : t.hierarchy == Hierarchy::kAuto ? 1.1 : 1.0;
  return s;
}

// The best cycle time depends on the fusion threshold: small buffers want
// short cycles.
double Coupled(const Tunables& t) {
  const double f = std::log2(static_cast<double>(t.fusion_threshold_bytes >> 20));
  const double c = std::log2(t.cycle_time_ms);
  const double want_c = f / 4 - 1;  // 1 MiB: 0.5 ms ... 128 MiB: 2.6 ms
  double s = 1e9 * (1.0 - 0.02 * (f - 5) * (f - 5));
  s *= 1.0 - 0.1 * (c - want_c) * (c - want_c);
  return std::max(s, 1e7);
}

TEST(Autotuner, WithoutNoiseEndsOnTheGridsBest) {
  const AutotuneOptions o{.warmup_samples = 2, .steps_per_sample = 3};
  for (bool p2p : {false, true}) {
    for (bool hosts : {false, true}) {
      const TuningSpace space = TuningSpace::Around(Start(), p2p, hosts);
      for (const Throughput& f : {Throughput(Separable), Throughput(Coupled)}) {
        const Job job = RunJob(o, Start(), space, f, 0, 1);
        const double best = GridBest(space, Start(), f);
        EXPECT_GE(f(job.chosen), 0.999 * best) << "p2p " << p2p << " hosts " << hosts;
        EXPECT_LT(static_cast<size_t>(job.samples), Grid(space, Start()).size());
      }
    }
  }
  // The separable job's best, exactly.
  const Job job =
      RunJob(o, Start(), TuningSpace::Around(Start(), true, true), Throughput(Separable), 0, 1);
  EXPECT_EQ(job.chosen.fusion_threshold_bytes, 16u << 20);
  EXPECT_EQ(job.chosen.cycle_time_ms, 2.5);
  EXPECT_EQ(job.chosen.cache_capacity, 1024u);
  EXPECT_EQ(job.chosen.allreduce_algo, "rd:0-256K,ring:256K-");
  EXPECT_EQ(job.chosen.hierarchy, Hierarchy::kOn);
}

TEST(Autotuner, WithNoiseChoosesWithinFivePercentOfTheGridsBest) {
  const AutotuneOptions o{.warmup_samples = 1, .steps_per_sample = 5};
  for (const Throughput& f : {Throughput(Separable), Throughput(Coupled)}) {
    const TuningSpace space = TuningSpace::Around(Start(), true, false);
    const double best = GridBest(space, Start(), f);
    int within = 0, worst_samples = 0;
    double worst = 1;
    for (unsigned seed = 1; seed <= 200; ++seed) {
      const Job job = RunJob(o, Start(), space, f, 0.05, seed);
      const double ratio = f(job.chosen) / best;
      within += ratio >= 0.95;
      worst = std::min(worst, ratio);
      worst_samples = std::max(worst_samples, job.samples);
    }
    EXPECT_GE(within, 190) << "of 200";
    EXPECT_GE(worst, 0.85);
    EXPECT_LT(static_cast<size_t>(worst_samples), Grid(space, Start()).size());
  }
}

TEST(Autotuner, LogsEverySampleAndTheChoiceLast) {
  const AutotuneOptions o{.warmup_samples = 2, .steps_per_sample = 3};
  const Job job =
      RunJob(o, Start(), TuningSpace::Around(Start(), false, false), Throughput(Separable), 0, 1);
  ASSERT_EQ(job.log.size(), static_cast<size_t>(job.samples) + 2);
  EXPECT_EQ(job.log.front(), Autotuner::kLogHeader);
  EXPECT_EQ(job.log[1].rfind("1,warmup,134217728,1,1024,\"\",0,", 0), 0u) << job.log[1];
  EXPECT_EQ(job.log[3].rfind("3,start,", 0), 0u) << job.log[3];
  EXPECT_NE(job.log.back().find(",chosen,16777216,2.5,1024,\"\",0,"), std::string::npos)
      << job.log.back();
  // Every line has the header's ten fields (the algorithm quoted).
  for (const std::string& l : job.log) {
    int fields = 1;
    bool quoted = false;
    for (char c : l) {
      if (c == '"') quoted = !quoted;
      fields += c == ',' && !quoted;
    }
    EXPECT_EQ(fields, 10) << l;
  }
}

TEST(Autotuner, ScoresTheStepsOfASampleLeavingOutTheStepAfterTheMark) {
  // A one-off broadcast, then steps of two tensors ("a" of 100 bytes at
  // mid-step, "b" of 300 at its end); three steps a sample, no warmup.
  // Step 0 shows the names, step 1 begins with the mark's first return
  // and is left out (it takes 9 s), steps 2-4 take 1 s each: the sample
  // runs from step 2's "a" to step 5's, 3 x 400 bytes over 3 s.
  const AutotuneOptions o{.warmup_samples = 0, .steps_per_sample = 3};
  std::vector<std::string> log;
  Autotuner tuner(o, Start(), TuningSpace::Around(Start(), false, false),
                  [&](const std::string& l) { log.push_back(l); });
  TimePoint now{};
  EXPECT_FALSE(tuner.Finished("broadcast.w", 1 << 20, now));
  std::optional<Tunables> next;
  int ended_at = -1;
  for (int step = 0; step < 8 && !next; ++step) {
    const auto half = std::chrono::milliseconds(step == 1 ? 4500 : 500);
    now += half;
    next = tuner.Finished("a", 100, now);
    if (next) {
      ended_at = step;
      break;
    }
    now += half;
    next = tuner.Finished("b", 300, now);
  }
  EXPECT_EQ(ended_at, 5);
  ASSERT_TRUE(next.has_value());
  ASSERT_EQ(log.size(), 2u);
  EXPECT_NE(log[1].find(",3.000000,1200,400"), std::string::npos) << log[1];
  EXPECT_NE(*next, Start());
}

TEST(Autotuner, AJobWhoseNamesNeverComeAgainIsNeverScored) {
  const AutotuneOptions o{.warmup_samples = 0, .steps_per_sample = 1};
  Autotuner tuner(o, Start(), TuningSpace::Around(Start(), false, false), nullptr);
  TimePoint now{};
  for (int i = 0; i < 1000; ++i) {
    now += std::chrono::milliseconds(1);
    EXPECT_FALSE(tuner.Finished("t" + std::to_string(i), 1 << 20, now));
  }
  EXPECT_EQ(tuner.samples(), 0);
  EXPECT_FALSE(tuner.done());
}

// The warning that no step was found waits for both 10,000 tensors and the
// time since the first: a model whose start-up broadcasts and first step
// are 12,000 new names, in 30 s, is not warned about, and its steps are
// found; names new for 10,000 tensors and 60 s are, once, by their kind.
TEST(Autotuner, SaysNoStepWasFoundAfterTenThousandTensorsAndTheTime) {
  using NoStep = Autotuner::NoStep;
  const AutotuneOptions o{.warmup_samples = 0, .steps_per_sample = 1};
  {
    Autotuner tuner(o, Start(), TuningSpace::Around(Start(), false, false), nullptr);
    TimePoint now{};
    for (int step = 0; step < 2; ++step) {
      for (int i = 0; i < 12000; ++i) {
        now += std::chrono::microseconds(1250);
        EXPECT_EQ(tuner.NoStepFound(true, now), NoStep::kNotYet) << step << " " << i;
        tuner.Finished("p" + std::to_string(i), 4, now);
      }
    }
  }
  for (const bool named : {true, false}) {
    Autotuner tuner(o, Start(), TuningSpace::Around(Start(), false, false), nullptr);
    TimePoint now{};
    int said_at = -1;
    for (int i = 0; i < 40000; ++i) {
      now += std::chrono::milliseconds(2);  // 60 s after the first at the 30,001st
      const NoStep why = tuner.NoStepFound(named, now);
      if (why == NoStep::kNotYet) continue;
      EXPECT_EQ(said_at, -1) << "said twice";
      EXPECT_EQ(why, named ? NoStep::kNamesNew : NoStep::kUnnamed);
      said_at = i;
    }
    EXPECT_EQ(said_at, 30000) << named;
  }
  {
    // Fast tensors: the count decides; zero seconds: never said.
    Autotuner fast(o, Start(), TuningSpace::Around(Start(), false, false), nullptr);
    AutotuneOptions never = o;
    never.no_step_warn_after = Duration::zero();
    Autotuner silent(never, Start(), TuningSpace::Around(Start(), false, false), nullptr);
    TimePoint now{};
    int said_at = -1;
    for (int i = 0; i < 20000; ++i) {
      now += std::chrono::seconds(1);
      if (fast.NoStepFound(false, now) != NoStep::kNotYet && said_at < 0) said_at = i;
      EXPECT_EQ(silent.NoStepFound(false, now), NoStep::kNotYet);
    }
    EXPECT_EQ(said_at, 10000 - 1);
  }
}

TEST(Autotuner, ASpaceOfOneValueEachEndsAtOnceOnTheStart) {
  TuningSpace one;
  one.fusion_threshold_bytes = {Start().fusion_threshold_bytes};
  one.cycle_time_ms = {1};
  one.cache_capacity = {1024};
  one.allreduce_algo = {""};
  one.hierarchy = {Hierarchy::kOff};
  const Job job = RunJob({.warmup_samples = 1, .steps_per_sample = 2}, Start(), one,
                         Throughput(Separable), 0, 1);
  EXPECT_EQ(job.samples, 2);  // the warmup, the start
  EXPECT_EQ(job.chosen, Start());
}

TEST(Tunables, EncodeDecodeRoundTripsAndRefusesShortBytes) {
  Tunables t = Start();
  t.allreduce_algo = "rd:0-16K,ring:16K-";
  t.hierarchy = Hierarchy::kAuto;
  t.cycle_time_ms = 2.5;
  const std::vector<uint8_t> b = t.Encode();
  EXPECT_EQ(Tunables::Decode(b), t);
  for (size_t n = 0; n < b.size(); ++n) {
    EXPECT_FALSE(Tunables::Decode(std::vector<uint8_t>(b.begin(), b.begin() + n))) << n;
  }
  // A hierarchy that is none of the four (its byte follows three 8-byte fields).
  std::vector<uint8_t> bad = b;
  bad[24] = 4;
  EXPECT_FALSE(Tunables::Decode(bad));
  for (Hierarchy h : {Hierarchy::kOn, Hierarchy::kOne, Hierarchy::kOff}) {
    bad[24] = static_cast<uint8_t>(h);
    t.hierarchy = h;
    EXPECT_EQ(Tunables::Decode(bad), t);
  }
}

}  // namespace
}  // namespace hora
