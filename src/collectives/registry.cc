// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/registry.h"

#include <algorithm>
#include <vector>

#include "collectives/allreduce_common.h"

namespace hora {

namespace cost {

int CrossingFlows(int n, int per_host, int mask) {
  const PowerOfTwoFold fold(n, 0);
  std::vector<int> leaving(static_cast<size_t>((n + per_host - 1) / per_host), 0);
  auto send = [&](int from, int to) {
    if (from / per_host != to / per_host) ++leaving[static_cast<size_t>(from / per_host)];
  };
  if (mask == 0) {
    for (int i = 0; i < fold.extra; ++i) send(2 * i, 2 * i + 1);  // (and back, as many)
  } else {
    for (int v = 0; v < fold.p; ++v) send(fold.Real(v), fold.Real(v ^ mask));
  }
  return *std::max_element(leaving.begin(), leaving.end());
}

}  // namespace cost

double CostModel::Exchange(int n, int mask, double bytes) const {
  const int flows = SpansHosts(n) ? cost::CrossingFlows(n, per_host, mask) : 0;
  if (flows == 0) return alpha_s + bytes * beta_s_per_byte;
  return net_alpha_s + bytes * LinkBeta(flows * link_sharers);
}

}  // namespace hora
