// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Autotuning in the engine (autotuner.h): the first rank's tuner scores the
// tensors each cycle finishes, and the settings it picks reach every rank
// through the negotiator at one cycle; each rank then applies them here.
#include <cstdio>
#include <string>

#include "engine/engine.h"

namespace hora {
namespace {

std::string Describe(const Tunables& t) {
  char text[160];
  std::snprintf(text, sizeof text,
                "fusion threshold %.3g MiB, cycle time %g ms, response cache %llu",
                static_cast<double>(t.fusion_threshold_bytes) / (1 << 20), t.cycle_time_ms,
                static_cast<unsigned long long>(t.cache_capacity));
  return std::string(text) + ", allreduce algorithm " +
         (t.allreduce_algo.empty() ? "by cost" : "'" + t.allreduce_algo + "'") +
         ", hierarchical allreduce " + HierarchyName(t.hierarchy);
}

}  // namespace

void Engine::Retune(const Tunables& t) {
  cycle_time_ticks_.store(CycleTimeOf(t.cycle_time_ms).count(), std::memory_order_relaxed);
  if (Status st = data_.Retune(t.allreduce_algo, t.hierarchy); !st.ok()) {
    logger_.Warning("autotuning: " + st.ToString());
  }
  logger_.Debug("autotuning: now " + Describe(t));
}

void Engine::Score(const std::vector<TensorRecord*>& done, TimePoint now) {
  const bool was_done = tuner_->done();
  for (const TensorRecord* p : done) {
    if (p->phantom) continue;
    const Autotuner::NoStep why = tuner_->NoStepFound(p->meta.cacheable, now);
    if (why != Autotuner::NoStep::kNotYet) {
      char text[96];
      std::snprintf(text, sizeof text, "autotuning: %llu collectives in %.0f s finished",
                    static_cast<unsigned long long>(tuner_->no_step_count()),
                    tuner_->no_step_seconds(now));
      logger_.Warning(
          std::string(text) +
          (why == Autotuner::NoStep::kUnnamed
               ? ", most of them unnamed, and no step was found: autotuning finds steps by a "
                 "tensor name that comes again, and an unnamed collective's name is new each "
                 "call, so nothing is tuned; give the collectives names (name=...)"
               : ", named, and no name came twice (the last '" + p->meta.name +
                     "'): autotuning finds steps by a tensor name that comes again, so nothing "
                     "is tuned; give each step's collectives the same names (no step number in "
                     "them)"));
    }
    if (std::optional<Tunables> next = tuner_->Finished(p->meta.name, p->meta.num_bytes(), now)) {
      negotiator_.OfferSettings(*next);
    }
  }
  if (!was_done && tuner_->done()) {
    logger_.Info("autotuning chose " + Describe(tuner_->best()) + ", after " +
                 std::to_string(tuner_->samples()) + " samples");
  }
}

}  // namespace hora
