// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// hora-engine-bench: the control plane under load. Each step submits
// --tensors allreduces of --bytes each (float32 sum, a model with many small
// layers) through the engine and waits for all of them; reported per step:
// time (avg, p50 over the slowest rank), engine cycles, slow-path cycles and
// the bytes this rank exchanged with the coordinator. It runs twice, with
// the response cache on and off (HORA_CACHE_CAPACITY=0), side by side.
//
//   horarun -np 4 build/bin/hora-engine-bench --tensors 200 --bytes 4K --steps 50
//   build/bin/hora-engine-bench --threads 8 --tensors 200 --bytes 4K   (ranks as threads)
//   ... --tensors 1 --bytes 4                                          (a lone allreduce)
//   ... --grouped        (the step's tensors as one grouped allreduce: one cycle)
//   ... --cache on       (only one of the two runs: on or off; for profiling)
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
  std::string cache = "both";
};

struct StepResult {
  double avg_us = 0, p50_us = 0;
  double cycles = 0, slow_cycles = 0, coordinator_bytes = 0;  // per step, this rank
  double driven_cycles = 0;  // of cycles: run by the waiting thread (Engine::Drive)
  double carried = 0;        // allreduces sent with the bit vector (carried_batches)
};

Status RunOne(Session& s, const Args& a, StepResult* out) {
  const size_t count = a.bytes / 4;
  std::vector<std::vector<float>> bufs(static_cast<size_t>(a.tensors),
                                       std::vector<float>(count, 1.0f));
  std::vector<std::string> names;
  for (int t = 0; t < a.tensors; ++t) names.push_back("layer" + std::to_string(t));
  std::vector<double> times;
  Session::EngineCounters start{};
  std::vector<Handle> hs(static_cast<size_t>(a.tensors));
  for (int step = 0; step < a.warmup + a.steps; ++step) {
    if (step == a.warmup) start = s.engine_counters();
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
    if (step >= a.warmup) times.push_back(us);
  }
  const auto end = s.engine_counters();
  std::sort(times.begin(), times.end());
  double sum = 0;
  for (double t : times) sum += t;
  out->avg_us = sum / static_cast<double>(times.size());
  out->p50_us = times[times.size() / 2];
  out->cycles = static_cast<double>(end.cycles - start.cycles) / a.steps;
  out->slow_cycles = static_cast<double>(end.slow_cycles - start.slow_cycles) / a.steps;
  out->driven_cycles = static_cast<double>(end.driven_cycles - start.driven_cycles) / a.steps;
  out->carried = static_cast<double>(end.carried_batches - start.carried_batches) / a.steps;
  out->coordinator_bytes =
      static_cast<double>(end.coordinator_bytes - start.coordinator_bytes) / a.steps;
  return Status::Ok();
}

void Print(int n, const Args& a, const char* cache, const StepResult& r) {
  std::printf("%4d %8d %9s %6s %12.1f %12.1f %10.1f %10.2f %14.0f %8.2f %8.2f\n", n, a.tensors,
              FormatBytes(a.bytes).c_str(), cache, r.avg_us, r.p50_us, r.cycles, r.slow_cycles,
              r.coordinator_bytes, r.driven_cycles, r.carried);
}

void Header(int n, const Args& a) {
  std::printf(
      "# hora-engine-bench: %d ranks, %d tensors of %s per step%s, %d steps after %d warm-up\n", n,
      a.tensors, FormatBytes(a.bytes).c_str(), a.grouped ? " (one group)" : "", a.steps, a.warmup);
  std::printf("# %2s %8s %9s %6s %12s %12s %10s %10s %14s %8s %8s\n", "np", "tensors", "bytes",
              "cache", "step_avg_us", "step_p50_us", "cycles", "slow", "coord_B/step", "driven",
              "carried");
}

int Fail(const Status& st) {
  std::fprintf(stderr, "hora-engine-bench: %s\n", st.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
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
    } else if (f == "--grouped") {
      a.grouped = true;
      continue;
    } else {
      std::fprintf(stderr,
                   "usage: hora-engine-bench [--tensors N] [--bytes B] [--steps N] [--warmup N] "
                   "[--threads N] [--grouped] [--cache on|off]\n");
      return 2;
    }
    ++i;
  }
  if (a.tensors < 1 || a.bytes < 4 || a.steps < 1 || a.warmup < 0) {
    std::fprintf(stderr,
                 "hora-engine-bench: --tensors, --bytes (>= 4), --steps must be positive\n");
    return 2;
  }
  for (const char* cache : {"on", "off"}) {
    if (a.cache != "both" && a.cache != cache) continue;
    std::map<std::string, std::string> settings;
    if (std::strcmp(cache, "off") == 0) settings["HORA_CACHE_CAPACITY"] = "0";
    if (a.threads > 0) {
      auto world = ThreadWorld::Create(a.threads);
      std::vector<StepResult> results(static_cast<size_t>(a.threads));
      std::vector<Status> status(static_cast<size_t>(a.threads));
      std::vector<std::thread> threads;
      for (int r = 0; r < a.threads; ++r) {
        threads.emplace_back([&, r] {
          SessionOptions o;
          o.rank = r;
          o.world = world;
          o.settings = settings;
          auto s = Session::Create(o);
          if (!s.ok()) {
            status[r] = s.status();
            return;
          }
          status[r] = RunOne(**s, a, &results[r]);
        });
      }
      for (auto& t : threads) t.join();
      for (const Status& st : status)
        if (!st.ok()) return Fail(st);
      if (std::strcmp(cache, "on") == 0 || a.cache == "off") Header(a.threads, a);
      Print(a.threads, a, cache, results[0]);
    } else {
      const char* job = std::getenv("HORA_JOB_ID");
      settings["HORA_JOB_ID"] = std::string(job ? job : "") + "-cache-" + cache;
      SessionOptions o;
      o.settings = settings;
      auto s = Session::Create(o);
      if (!s.ok()) return Fail(s.status());
      StepResult r;
      Status st = RunOne(**s, a, &r);
      if (!st.ok()) return Fail(st);
      if ((*s)->rank() == 0) {
        if (std::strcmp(cache, "on") == 0 || a.cache == "off") Header((*s)->size(), a);
        Print((*s)->size(), a, cache, r);
      }
    }
  }
  return 0;
}
