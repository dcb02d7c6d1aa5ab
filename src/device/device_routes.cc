// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The ways a batch of GPU tensors goes through the GPU (docs/dev/gpu.md,
// "Routes"): the route table, and the choice of a row for a batch.
//
// Each route is its own file, which defines its row (DeviceStaging::Row,
// for the route's tag type), and a line in the list below. A batch goes to
// the row HORA_GPU_ROUTE names for its size, if that row fits it
// (gpu_routing.h); else to the row of least predicted cost among those that
// fit it (RouteCost), as the host selector picks an algorithm where no
// range names one (collectives/selector.h). Where a row declines on every
// rank alike (no device window, NCCL unusable under auto), the next takes
// the batch. A tie of cost goes to the row listed first.
//
// The costs are fitted to the measured times of two ranks on one NVIDIA
// H200 (docs/dev/gpu_runs.md, 2026-11-26 and 11-27); each row's file says
// which. The ranks there shared one GPU; a job with a GPU per rank may
// differ, and HORA_GPU_ROUTE overrides the choice by size.
#include <algorithm>
#include <string>

#include "device/device_staging.h"

namespace hora {

// The rows, each defined in its route's file.
struct OneRankRoute;       // device_staging_one_rank.cc
struct NcclRoute;          // device_staging_nccl.cc
struct WindowRoute;        // device_staging_window.cc
struct StagedChunksRoute;  // device_staging_chunks.cc
struct StagedRoute;        // device_staging_whole.cc
template <>
const DeviceStaging::RouteRow& DeviceStaging::Row<OneRankRoute>();
template <>
const DeviceStaging::RouteRow& DeviceStaging::Row<NcclRoute>();
template <>
const DeviceStaging::RouteRow& DeviceStaging::Row<WindowRoute>();
template <>
const DeviceStaging::RouteRow& DeviceStaging::Row<StagedChunksRoute>();
template <>
const DeviceStaging::RouteRow& DeviceStaging::Row<StagedRoute>();

std::span<const DeviceStaging::RouteRow* const> DeviceStaging::Routes() {
  static const RouteRow* const kRows[] = {
      &Row<OneRankRoute>(),      &Row<NcclRoute>(),   &Row<WindowRoute>(),
      &Row<StagedChunksRoute>(), &Row<StagedRoute>(),  // fits every batch
  };
  return kRows;
}

std::string DeviceStaging::RouteNames() {
  std::string names;
  for (const RouteRow* row : Routes())
    names += (names.empty() ? "" : ", ") + std::string(row->name);
  return names;
}

const DeviceStaging::RouteRow* DeviceStaging::FindRoute(std::string_view name) {
  for (const RouteRow* row : Routes()) {
    if (name == row->name) return row;
  }
  return nullptr;
}

std::vector<const DeviceStaging::RouteRow*> DeviceStaging::Candidates(const RouteAsk& ask,
                                                                      bool* first_named) {
  std::vector<const RouteRow*> rows;
  *first_named = false;
  const NamedRange* range = FindRange(routing_.first, ask.bytes);
  const RouteRow* named = range != nullptr ? FindRoute(range->name) : nullptr;
  if (named != nullptr) {
    RouteAsk asked = ask;
    asked.named = true;
    if (named->fits(*this, asked)) {
      rows.push_back(named);
      *first_named = true;
    }
  }
  const size_t first_costed = rows.size();
  for (const RouteRow* row : Routes()) {
    if (row != named && row->fits(*this, ask)) rows.push_back(row);
  }
  std::stable_sort(rows.begin() + static_cast<std::ptrdiff_t>(first_costed), rows.end(),
                   [&](const RouteRow* a, const RouteRow* b) {
                     return a->cost.Predict(ask.bytes) < b->cost.Predict(ask.bytes);
                   });
  return rows;
}

Status DeviceStaging::Route(CollectiveBackend& data, const std::vector<TensorRecord*>& batch,
                            int rank, int size, std::vector<std::byte>* fusion, bool joined_any) {
  const RouteAsk ask{data, batch,  batch.front()->meta, rank,
                     size, fusion, joined_any,          RouteBytes(batch, size)};
  bool first_named = false;
  const std::vector<const RouteRow*> rows = Candidates(ask, &first_named);
  for (const RouteRow* row : rows) {
    RouteAsk asked = ask;
    asked.named = first_named && row == rows.front();
    bool declined = false;
    Status st = row->run(*this, asked, &declined);
    if (declined) continue;
    const auto all = Routes();
    route_batches_.resize(all.size());
    ++route_batches_[static_cast<size_t>(std::find(all.begin(), all.end(), row) - all.begin())];
    ++batches_;
    return st;
  }
  return InternalError("no GPU route took the batch");  // (the last fits every batch)
}

std::vector<std::pair<std::string, uint64_t>> DeviceStaging::route_batches() const {
  std::vector<std::pair<std::string, uint64_t>> counts;
  const auto all = Routes();
  for (size_t i = 0; i < all.size(); ++i) {
    counts.emplace_back(all[i]->name, i < route_batches_.size() ? route_batches_[i] : 0);
  }
  return counts;
}

}  // namespace hora
