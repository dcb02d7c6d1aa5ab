// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Flat or hierarchical: the cost model's prediction of both for an
// allreduce over a job of `hosts` hosts with `per_host` ranks on each
// (HORA_HIERARCHICAL_ALLREDUCE=auto decides by it, size by size).
//
// Flat: the selector's choice for the whole job, each algorithm costed on
// the two links (CostModel::OnHosts): the ring crosses from host to host
// once a step, recursive doubling's and halving's far exchanges take every
// rank of a host over its link at once.
// Hierarchical (AllreduceHierarchical): a ring reduce-scatter and a ring
// allgather within the host, and between them the selector's choice for
// the block (1/per_host of the message) across the hosts, all of a host's
// places crossing its link at once. With one rank a host crossing
// (AllreduceHierarchicalOne): the ring reduce-scatter, a gather to the
// host's first rank, the selector's choice for the whole message across
// the hosts alone on the link, and the selector's broadcast within the
// host.
#pragma once

#include <algorithm>
#include <cstddef>

#include "collectives/registry.h"
#include "collectives/selector.h"

namespace hora {

struct HierarchyPrediction {
  const AllreduceAlgorithm* flat = nullptr;
  double flat_s = 0;
  const AllreduceAlgorithm* across = nullptr;  // the hierarchy's algorithm across hosts
  double hierarchical_s = 0;
  const AllreduceAlgorithm* across_one = nullptr;     // the same, one rank a host crossing
  const BroadcastAlgorithm* broadcast_one = nullptr;  // its broadcast within the host
  double one_s = 0;

  bool hierarchical_faster() const { return std::min(hierarchical_s, one_s) < flat_s; }
  // Of the two hierarchies, one rank a host crossing (not every rank).
  bool one_faster() const { return one_s < hierarchical_s; }
};

// The cost model hierarchical allreduce's exchange across hosts is chosen
// with: one rank a host, `per_host` such exchanges over each link at once.
CostModel AcrossHostsModel(const Selector& selector, int per_host);

// hosts >= 2, per_host >= 2.
HierarchyPrediction PredictHierarchy(const Selector& selector, int hosts, int per_host,
                                     size_t bytes);

}  // namespace hora
