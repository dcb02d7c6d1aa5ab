// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/combinators/subset/subset_transport.h"

#include <algorithm>
#include <memory>

namespace hora {

SubsetTransport::SubsetTransport(Transport& parent, std::vector<int> ranks)
    : parent_(parent), ranks_(std::move(ranks)) {
  const auto it = std::find(ranks_.begin(), ranks_.end(), parent_.rank());
  if (it != ranks_.end()) rank_ = static_cast<int>(it - ranks_.begin());
}

int SubsetTransport::ParentRank(int peer, Request* error) const {
  if (peer < 0 || peer >= size() || peer == rank_) {
    auto state = std::make_shared<RequestState>(false, peer, 0);
    state->Complete(InvalidPeerError(rank_, peer, size()));
    *error = state;
    return -1;
  }
  return ranks_[static_cast<size_t>(peer)];
}

Request SubsetTransport::Isend(int peer, Tag tag, const void* data, size_t bytes) {
  Request error;
  const int p = ParentRank(peer, &error);
  return p < 0 ? error : parent_.Isend(p, tag, data, bytes);
}

Request SubsetTransport::IsendInPlace(int peer, Tag tag, const void* data, size_t bytes) {
  Request error;
  const int p = ParentRank(peer, &error);
  return p < 0 ? error : parent_.IsendInPlace(p, tag, data, bytes);
}

Request SubsetTransport::Irecv(int peer, Tag tag, void* data, size_t bytes) {
  Request error;
  const int p = ParentRank(peer, &error);
  return p < 0 ? error : parent_.Irecv(p, tag, data, bytes);
}

Request SubsetTransport::IrecvReduce(int peer, Tag tag, void* dst, size_t count,
                                     const ReduceSpec& spec) {
  Request error;
  const int p = ParentRank(peer, &error);
  return p < 0 ? error : parent_.IrecvReduce(p, tag, dst, count, spec);
}

}  // namespace hora
