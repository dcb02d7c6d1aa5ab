// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// SubsetTransport: some of a transport's ranks seen as a group of their own
// (a process set). Rank i of the subset is rank ranks[i] of the parent; tags
// pass through unchanged, so Comms over a subset keep apart from the
// parent's other traffic by their tag context (Comm's context argument).
//
//   SubsetTransport view(parent, {0, 2, 3});  // on parent rank 2: rank 1 of 3
//   view.Isend(2, tag, data, bytes);           // goes to parent rank 3
#pragma once

#include <vector>

#include "transport/transport.h"

namespace hora {

class SubsetTransport final : public Transport {
 public:
  // `ranks`: parent ranks, sorted, unique, containing the parent's own rank.
  // `parent` must outlive the view.
  SubsetTransport(Transport& parent, std::vector<int> ranks);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  const char* name() const override { return parent_.name(); }

  Request Isend(int peer, Tag tag, const void* data, size_t bytes) override;
  Request IsendInPlace(int peer, Tag tag, const void* data, size_t bytes) override;
  Request Irecv(int peer, Tag tag, void* data, size_t bytes) override;
  Request IrecvReduce(int peer, Tag tag, void* dst, size_t count, const ReduceSpec& spec) override;
  void Cancel(const Request& request) override { parent_.Cancel(request); }
  Status Wait(const Request& request, TimePoint deadline) override {
    return parent_.Wait(request, deadline);
  }
  Status WaitFor(const Request& request, Duration timeout) override {
    return parent_.WaitFor(request, timeout);
  }
  bool Progress() override { return parent_.Progress(); }
  Status LostPeer() override { return parent_.LostPeer(); }
  bool ReadsInPlace(int from, int to, size_t bytes) override {
    const int n = size();
    if (from < 0 || from >= n || to < 0 || to >= n) return false;
    return parent_.ReadsInPlace(ranks_[static_cast<size_t>(from)], ranks_[static_cast<size_t>(to)],
                                bytes);
  }
  bool ReadsOnRequest(int from, int to) override {
    const int n = size();
    if (from < 0 || from >= n || to < 0 || to >= n) return false;
    return parent_.ReadsOnRequest(ranks_[static_cast<size_t>(from)],
                                  ranks_[static_cast<size_t>(to)]);
  }

 private:
  // The parent rank of subset rank `peer`, or -1 with `*error` set.
  int ParentRank(int peer, Request* error) const;

  Transport& parent_;
  const std::vector<int> ranks_;
  int rank_ = -1;
};

}  // namespace hora
