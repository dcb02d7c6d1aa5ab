// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// hora-engine-bench: the control plane under load. Each step submits
// --tensors allreduces of --bytes each (float32 sum, a model with many small
// layers) through the engine and waits for all of them; reported per step:
// time (avg, p50 over the slowest rank), engine cycles, slow-path cycles and
// the bytes this rank exchanged with the coordinator. It runs two sessions
// at once, with the response cache on and off (HORA_CACHE_CAPACITY=0), and
// takes turns: --rounds blocks of steps on each (default 10), so that both
// are timed in the same seconds on a machine whose speed drifts.
//
//   horarun -np 4 build/bin/hora-engine-bench --tensors 200 --bytes 4K --steps 50
//   build/bin/hora-engine-bench --threads 8 --tensors 200 --bytes 4K   (ranks as threads)
//   ... --tensors 1 --bytes 4                                          (a lone allreduce)
//   ... --grouped        (the step's tensors as one grouped allreduce: one cycle)
//   ... --cache on       (only one of the two sessions: on or off; for profiling)
//   ... --long-names     (names as long as a model's parameters' names,
//                         "model.blocks.17.attention.weight": too long for a
//                         string's inline buffer, as most real names are)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/units.h"
#include "hora/hora.h"

namespace {

using namespace hora;

struct Args {
  int tensors = 200;
  size_t bytes = 4096;
  int steps = 50;
  int warmup = 5;
  int threads = 0;  // 0: ranks are processes (horarun / mpirun)
  bool grouped = false;
  bool long_names = false;
  std::string cache = "both";
  int rounds = 10;  // blocks of steps per session, taking turns (at most --steps)
};

struct StepResult {
  double avg_us = 0, p50_us = 0;
  double cycles = 0, slow_cycles = 0, coordinator_bytes = 0;  // per step, this rank
  double driven_cycles = 0;  // of cycles: run by the waiting thread (Engine::Drive)
  double carried = 0;        // allreduces sent with the bit vector (carried_batches)
};

// `steps` steps on `s`; each one's time (the slowest rank's) is appended
// to `times` unless it is null (warm-up).
Status RunSteps(Session& s, const Args& a, int steps, std::vector<std::vector<float>>& bufs,
                const std::vector<std::string>& names, std::vector<double>* times) {
  const size_t count = a.bytes / 4;
  std::vector<Handle> hs(static_cast<size_t>(a.tensors));
  for (int step = 0; step < steps; ++step) {
    HORA_RETURN_IF_ERROR(s.Barrier());
    const auto t0 = std::chrono::steady_clock::now();
    if (a.grouped) {
      std::vector<TensorView> views;
      views.reserve(static_cast<size_t>(a.tensors));
      for (int t = 0; t < a.tensors; ++t)
        views.push_back(TensorView::Flat(bufs[t].data(), DataType::kFloat32, count));
      hs = s.GroupedAllreduceAsync("layers", views, views);
    } else {
      for (int t = 0; t < a.tensors; ++t) {
        TensorView v = TensorView::Flat(bufs[t].data(), DataType::kFloat32, count);
        hs[t] = s.AllreduceAsync(names[t], v, v);
      }
    }
    for (auto& h : hs) HORA_RETURN_IF_ERROR(h.Wait(std::chrono::seconds(120)));
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    HORA_RETURN_IF_ERROR(s.Allreduce(TensorView::Flat(&us, DataType::kFloat64, 1),
                                     TensorView::Flat(&us, DataType::kFloat64, 1),
                                     {ReduceOp::kMax}));
    if (times != nullptr) times->push_back(us);
  }
  return Status::Ok();
}

// One rank's part: warms every session up, then runs --steps steps on each
// in --rounds blocks, taking turns (so that all of them see the machine as
// it is in the same seconds).
Status RunRank(const std::vector<Session*>& sessions, const Args& a, std::vector<StepResult>* out) {
  const size_t n = sessions.size();
  std::vector<std::vector<float>> bufs(static_cast<size_t>(a.tensors),
                                       std::vector<float>(a.bytes / 4, 1.0f));
  std::vector<std::string> names;
  for (int t = 0; t < a.tensors; ++t) {
    names.push_back(a.long_names ? "model.blocks." + std::to_string(t) + ".attention.weight"
                                 : "layer" + std::to_string(t));
  }
  std::vector<std::vector<double>> times(n);
  std::vector<Session::EngineCounters> start(n);
  for (size_t i = 0; i < n; ++i) {
    HORA_RETURN_IF_ERROR(RunSteps(*sessions[i], a, a.warmup, bufs, names, nullptr));
    start[i] = sessions[i]->engine_counters();
  }
  for (int round = 0; round < a.rounds; ++round) {
    // The steps split as evenly as they go.
    const int steps = a.steps / a.rounds + (round < a.steps % a.rounds ? 1 : 0);
    for (size_t i = 0; i < n; ++i) {
      HORA_RETURN_IF_ERROR(RunSteps(*sessions[i], a, steps, bufs, names, &times[i]));
    }
  }
  out->assign(n, StepResult{});
  for (size_t i = 0; i < n; ++i) {
    const Session::EngineCounters end = sessions[i]->engine_counters();
    std::vector<double>& t = times[i];
    std::sort(t.begin(), t.end());
    double sum = 0;
    for (double x : t) sum += x;
    StepResult& r = (*out)[i];
    const double steps = static_cast<double>(a.steps);
    r.avg_us = sum / static_cast<double>(t.size());
    r.p50_us = t[t.size() / 2];
    r.cycles = static_cast<double>(end.cycles - start[i].cycles) / steps;
    r.slow_cycles = static_cast<double>(end.slow_cycles - start[i].slow_cycles) / steps;
    r.driven_cycles = static_cast<double>(end.driven_cycles - start[i].driven_cycles) / steps;
    r.carried = static_cast<double>(end.carried_batches - start[i].carried_batches) / steps;
    r.coordinator_bytes =
        static_cast<double>(end.coordinator_bytes - start[i].coordinator_bytes) / steps;
  }
  return Status::Ok();
}

void Print(int n, const Args& a, const char* cache, const StepResult& r) {
  std::printf("%4d %8d %9s %6s %12.1f %12.1f %10.1f %10.2f %14.0f %8.2f %8.2f\n", n, a.tensors,
              FormatBytes(a.bytes).c_str(), cache, r.avg_us, r.p50_us, r.cycles, r.slow_cycles,
              r.coordinator_bytes, r.driven_cycles, r.carried);
}

void Header(int n, const Args& a) {
  std::printf(
      "# hora-engine-bench: %d ranks, %d tensors of %s per step%s, %d steps after %d warm-up, in "
      "%d rounds\n",
      n, a.tensors, FormatBytes(a.bytes).c_str(),
      a.grouped ? " (one group)" : (a.long_names ? " (long names)" : ""), a.steps, a.warmup,
      a.rounds);
  std::printf("# %2s %8s %9s %6s %12s %12s %10s %10s %14s %8s %8s\n", "np", "tensors", "bytes",
              "cache", "step_avg_us", "step_p50_us", "cycles", "slow", "coord_B/step", "driven",
              "carried");
}

int Fail(const Status& st) {
  std::fprintf(stderr, "hora-engine-bench: %s\n", st.ToString().c_str());
  return 1;
}

}  // namespace

constexpr char kUsage[] =
    "usage: hora-engine-bench [--tensors N] [--bytes B] [--steps N] [--warmup N] "
    "[--threads N] [--grouped] [--cache on|off] [--rounds N] [--long-names]\n";

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (f == "-h" || f == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (f == "--tensors") {
      a.tensors = std::atoi(v);
    } else if (f == "--bytes") {
      auto b = ParseBytes(v);
      a.bytes = b ? static_cast<size_t>(*b) : 0;
    } else if (f == "--steps") {
      a.steps = std::atoi(v);
    } else if (f == "--warmup") {
      a.warmup = std::atoi(v);
    } else if (f == "--threads") {
      a.threads = std::atoi(v);
    } else if (f == "--cache" && (std::string(v) == "on" || std::string(v) == "off")) {
      a.cache = v;
    } else if (f == "--rounds") {
      a.rounds = std::atoi(v);
    } else if (f == "--grouped") {
      a.grouped = true;
      continue;
    } else if (f == "--long-names") {
      a.long_names = true;
      continue;
    } else {
      std::fputs(kUsage, stderr);
      return 2;
    }
    ++i;
  }
  if (a.tensors < 1 || a.bytes < 4 || a.steps < 1 || a.warmup < 0 || a.rounds < 1) {
    std::fprintf(stderr,
                 "hora-engine-bench: --tensors, --bytes (>= 4), --steps, --rounds must be "
                 "positive\n");
    return 2;
  }
  a.rounds = std::min(a.rounds, a.steps);  // (a round has a step at least)
  std::vector<const char*> caches;
  for (const char* cache : {"on", "off"}) {
    if (a.cache == "both" || a.cache == cache) caches.push_back(cache);
  }
  auto settings_for = [&](const char* cache) {
    std::map<std::string, std::string> settings;
    if (std::strcmp(cache, "off") == 0) settings["HORA_CACHE_CAPACITY"] = "0";
    return settings;
  };
  auto print = [&](int n, const std::vector<StepResult>& results) {
    Header(n, a);
    for (size_t i = 0; i < caches.size(); ++i) Print(n, a, caches[i], results[i]);
  };
  if (a.threads > 0) {
    std::vector<std::shared_ptr<ThreadWorld>> worlds;
    for (size_t i = 0; i < caches.size(); ++i) worlds.push_back(ThreadWorld::Create(a.threads));
    std::vector<std::vector<StepResult>> results(static_cast<size_t>(a.threads));
    std::vector<Status> status(static_cast<size_t>(a.threads));
    std::vector<std::thread> threads;
    for (int r = 0; r < a.threads; ++r) {
      threads.emplace_back([&, r] {
        std::vector<std::unique_ptr<Session>> owned;
        std::vector<Session*> sessions;
        for (size_t i = 0; i < caches.size(); ++i) {
          SessionOptions o;
          o.rank = r;
          o.world = worlds[i];
          o.settings = settings_for(caches[i]);
          auto s = Session::Create(o);
          if (!s.ok()) {
            status[r] = s.status();
            return;
          }
          owned.push_back(std::move(*s));
          sessions.push_back(owned.back().get());
        }
        status[r] = RunRank(sessions, a, &results[r]);
      });
    }
    for (auto& t : threads) t.join();
    for (const Status& st : status)
      if (!st.ok()) return Fail(st);
    print(a.threads, results[0]);
  } else {
    const char* job = std::getenv("HORA_JOB_ID");
    std::vector<std::unique_ptr<Session>> owned;
    std::vector<Session*> sessions;
    for (const char* cache : caches) {
      SessionOptions o;
      o.settings = settings_for(cache);
      o.settings["HORA_JOB_ID"] = std::string(job ? job : "") + "-cache-" + cache;
      auto s = Session::Create(o);
      if (!s.ok()) return Fail(s.status());
      owned.push_back(std::move(*s));
      sessions.push_back(owned.back().get());
    }
    std::vector<StepResult> results;
    Status st = RunRank(sessions, a, &results);
    if (!st.ok()) return Fail(st);
    if (sessions.front()->rank() == 0) print(sessions.front()->size(), results);
  }
  return 0;
}
