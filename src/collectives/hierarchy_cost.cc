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
  const double within_s = cost::Ring(within, per_host, static_cast<double>(bytes));
  p.hierarchical_s = within_s + across.Predict(*p.across, hosts, block);
  // One rank a host: the gather to it and the broadcast's scatter each move
  // (L-1)/L of the message within the host, in L-1 messages.
  const CostModel alone = AcrossHostsModel(selector, 1);
  p.across_one = &selector.ChooseAllreduce(hosts, bytes, /*shared=*/false, alone);
  const double others = static_cast<double>(per_host - 1);
  const double gather_s = others * within.alpha_s +
                          others / per_host * static_cast<double>(bytes) * within.beta_s_per_byte;
  p.one_s = within_s + 2 * gather_s + alone.Predict(*p.across_one, hosts, bytes);
  return p;
}

}  // namespace hora
