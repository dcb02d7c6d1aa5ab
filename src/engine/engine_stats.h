// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "engine/negotiator.h"

namespace hora {

// What an engine counted since it started (Engine::stats()).
struct EngineStats {
  uint64_t cycles = 0;
  uint64_t slow_cycles = 0;        // cycles that went through the coordinator
  uint64_t coordinator_bytes = 0;  // request and response bytes of the slow path, this rank
  uint64_t cache_hits = 0;         // tensors that ran from the cache
  uint64_t cache_misses = 0;       // tensors negotiated with the coordinator
  uint64_t cache_evictions = 0;
  uint64_t cache_invalidations = 0;
  uint64_t tensors = 0;          // tensors completed (ok or error)
  uint64_t fused_batches = 0;    // allreduce batches of more than one tensor
  uint64_t driven_cycles = 0;    // cycles run by a waiter (Drive), not the engine's thread
  uint64_t carried_batches = 0;  // cached allreduces sent with the bit vector (one step fewer)
  // GPU batches by the device backend's route that ran them
  // (DeviceBatches::route_batches).
  std::map<std::string, uint64_t> gpu_route_batches;
  uint64_t name_records = 0;    // records by name: in flight, and idle ones kept (see TensorRecord)
  uint64_t idle_wakeups = 0;    // an idle engine's thread woke to look (Loop)
  uint64_t settings_taken = 0;  // autotuning's settings taken (every rank alike)

  // A cycle's negotiation (one more cycle).
  void AddCycle(const NegotiationCounts& c) {
    ++cycles;
    cache_hits += c.hits;
    cache_misses += c.misses;
    cache_invalidations += c.invalidations;
    cache_evictions += c.evictions;
    slow_cycles += c.slow_cycles;
    coordinator_bytes += c.coordinator_bytes;
  }
};

}  // namespace hora
