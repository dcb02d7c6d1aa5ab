// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/tunables.h"

#include <cstring>

namespace hora {
namespace {

template <typename T>
void Put(std::vector<uint8_t>& out, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

template <typename T>
bool Take(const std::vector<uint8_t>& in, size_t& at, T* v) {
  if (in.size() - at < sizeof(T)) return false;
  std::memcpy(v, in.data() + at, sizeof(T));
  at += sizeof(T);
  return true;
}

}  // namespace

Tunables Tunables::FromConfig(const Config& config) {
  Tunables t;
  t.fusion_threshold_bytes = config.fusion_threshold_bytes;
  t.cycle_time_ms = config.cycle_time_ms;
  t.cache_capacity = config.cache_capacity;
  t.allreduce_algo = config.allreduce_algo;
  t.hierarchy = HierarchyOf(config);
  return t;
}

std::vector<uint8_t> Tunables::Encode() const {
  std::vector<uint8_t> out;
  Put(out, fusion_threshold_bytes);
  Put(out, cycle_time_ms);
  Put(out, cache_capacity);
  Put(out, static_cast<uint8_t>(hierarchy));
  Put(out, static_cast<uint64_t>(allreduce_algo.size()));
  out.insert(out.end(), allreduce_algo.begin(), allreduce_algo.end());
  return out;
}

std::optional<Tunables> Tunables::Decode(const std::vector<uint8_t>& in) {
  Tunables t;
  size_t at = 0;
  uint8_t hierarchy = 0;
  uint64_t algo_bytes = 0;
  if (!Take(in, at, &t.fusion_threshold_bytes) || !Take(in, at, &t.cycle_time_ms) ||
      !Take(in, at, &t.cache_capacity) || !Take(in, at, &hierarchy) || !Take(in, at, &algo_bytes) ||
      in.size() - at != algo_bytes)
    return std::nullopt;
  if (hierarchy > static_cast<uint8_t>(Hierarchy::kOne)) return std::nullopt;
  t.hierarchy = static_cast<Hierarchy>(hierarchy);
  t.allreduce_algo.assign(reinterpret_cast<const char*>(in.data() + at), algo_bytes);
  return t;
}

}  // namespace hora
