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
  const auto B = static_cast<double>(bytes);
  const double ring_s = cost::Ring(within, per_host, B);
  p.hierarchical_s = ring_s + across.Predict(*p.across, hosts, block);
  // One rank a host: the same reduce-scatter (the ring's cost without its
  // allgather's L-1 steps), the gather to it ((L-1)/L of the message in L-1
  // messages), the whole message across hosts with no other transfer on
  // the link, and the selector's broadcast within the host (its Comm has
  // no window).
  const CostModel alone = AcrossHostsModel(selector, 1);
  p.across_one = &selector.ChooseAllreduce(hosts, bytes, /*shared=*/false, alone);
  p.broadcast_one = &selector.ChooseBroadcast(per_host, bytes, /*shared=*/false);
  const double others = static_cast<double>(per_host - 1);
  const double reduce_scatter_s = ring_s - others * within.Hop(per_host, B / per_host);
  const double gather_s = others * within.alpha_s + others / per_host * B * within.beta_s_per_byte;
  p.one_s = reduce_scatter_s + gather_s + alone.Predict(*p.across_one, hosts, bytes) +
            within.Predict(*p.broadcast_one, per_host, bytes);
  return p;
}

}  // namespace hora
