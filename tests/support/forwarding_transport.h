// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A transport that passes every call to another one: tests derive from it
// and change one call (count the bytes sent, declare a lost peer).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "transport/transport.h"

namespace hora::testing {

class ForwardingTransport : public Transport {
 public:
  explicit ForwardingTransport(std::unique_ptr<Transport> inner)
      : owned_(std::move(inner)), inner_(owned_.get()) {}
  // Not owning: `inner` outlives this one.
  explicit ForwardingTransport(Transport& inner) : inner_(&inner) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const char* name() const override { return inner_->name(); }
  Request Isend(int peer, Tag tag, const void* data, size_t bytes) override {
    return inner_->Isend(peer, tag, data, bytes);
  }
  Request IsendInPlace(int peer, Tag tag, const void* data, size_t bytes) override {
    return inner_->IsendInPlace(peer, tag, data, bytes);
  }
  Request Irecv(int peer, Tag tag, void* data, size_t bytes) override {
    return inner_->Irecv(peer, tag, data, bytes);
  }
  Request IrecvReduce(int peer, Tag tag, void* dst, size_t count, const ReduceSpec& spec) override {
    return inner_->IrecvReduce(peer, tag, dst, count, spec);
  }
  void Cancel(const Request& request) override { inner_->Cancel(request); }
  Status Wait(const Request& request, TimePoint deadline) override {
    return inner_->Wait(request, deadline);
  }
  Status WaitFor(const Request& request, Duration timeout) override {
    return inner_->WaitFor(request, timeout);
  }
  bool Progress() override { return inner_->Progress(); }
  bool ReadsInPlace(int from, int to, size_t bytes) override {
    return inner_->ReadsInPlace(from, to, bytes);
  }
  bool ReadsOnRequest(int from, int to) override { return inner_->ReadsOnRequest(from, to); }
  Status LostPeer() override { return inner_->LostPeer(); }
  int SilentPeer() override { return inner_->SilentPeer(); }
  SharedWindow* Window(uint32_t context) override { return inner_->Window(context); }
  Transport* ThisHost(std::vector<int>* ranks) override { return inner_->ThisHost(ranks); }
  Result<std::unique_ptr<PendingGroupWindows>> PrepareGroupWindows(std::span<const int> ranks,
                                                                   uint64_t key) override {
    return inner_->PrepareGroupWindows(ranks, key);
  }

 private:
  std::unique_ptr<Transport> owned_;
  Transport* inner_;
};

}  // namespace hora::testing
