// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "api/layout_exchange.h"

#include <string>
#include <vector>

namespace hora {

Status ExchangeLayout(CollectiveBackend& backend, int rank, int size, RankLayout* layout) {
  layout->rank = rank;
  layout->size = size;
  const auto n = static_cast<size_t>(size);
  const LocalPlace mine{layout->local_rank, layout->local_size};
  std::vector<LocalPlace> all(n);
  const std::vector<size_t> bytes(n, sizeof(LocalPlace));
  HORA_RETURN_IF_ERROR(
      backend.Allgatherv(&mine, all.data(), bytes)
          .WithContext("rank " + std::to_string(layout->rank) +
                       ": gathering every rank's local rank and size (for the cross ranks)"));
  CompleteLayout(all, layout);
  return Status::Ok();
}

}  // namespace hora
