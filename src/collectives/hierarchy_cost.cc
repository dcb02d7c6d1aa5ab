// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/hierarchy_cost.h"

namespace hora {

CostModel AcrossHostsModel(const Selector& selector, int per_host) {
  return selector.cost_model().OnHosts(1, per_host);
}

HierarchyPrediction PredictHierarchy(const Selector& selector, int hosts, int per_host,
                                     size_t bytes) {
  HierarchyPrediction p;
  const int n = hosts * per_host;
  const CostModel flat = selector.cost_model().OnHosts(per_host);
  p.flat = &selector.ChooseAllreduce(n, bytes, /*shared=*/false, flat);
  p.flat_s = flat.Predict(*p.flat, n, bytes);

  const CostModel within = selector.cost_model().OnHosts(0);
  const size_t block = (bytes + static_cast<size_t>(per_host) - 1) / static_cast<size_t>(per_host);
  const CostModel across = AcrossHostsModel(selector, per_host);
  p.across = &selector.ChooseAllreduce(hosts, block, /*shared=*/false, across);
  // Reduce-scatter and allgather: per_host - 1 ring steps each, as a ring
  // allreduce within the host has.
  p.hierarchical_s = cost::Ring(within, per_host, static_cast<double>(bytes)) +
                     across.Predict(*p.across, hosts, block);
  return p;
}

}  // namespace hora
