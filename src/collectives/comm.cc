// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/comm.h"

#include <cstdio>

#include "collectives/kernels/reduce.h"

namespace hora {

Comm::Comm(Transport& transport, Duration timeout, size_t segment_bytes, uint32_t context)
    : transport_(transport),
      timeout_(timeout),
      segment_bytes_(segment_bytes),
      context_bits_(static_cast<uint64_t>(context % kMaxContexts) << kContextShift),
      window_(transport.Window(context % kMaxContexts)),
      scratch_(4) {}

Comm::~Comm() { End(); }

void Comm::Begin(const char* collective, const char* algorithm) {
  End();
  collective_ = collective;
  algorithm_ = algorithm;
  ++sequence_;
  tag_base_ = context_bits_ | ((sequence_ & kSequenceMask) << kSequenceShift);
}

void Comm::End() {
  for (const Request& r : outstanding_) {
    if (!r->done()) transport_.Cancel(r);
  }
  outstanding_.clear();
}

Request Comm::Isend(int peer, uint64_t local_tag, const void* data, size_t bytes) {
  Request r = transport_.Isend(peer, tag_base_ | local_tag, data, bytes);
  outstanding_.push_back(r);
  return r;
}

Request Comm::Irecv(int peer, uint64_t local_tag, void* data, size_t bytes) {
  Request r = transport_.Irecv(peer, tag_base_ | local_tag, data, bytes);
  outstanding_.push_back(r);
  return r;
}

Request Comm::IrecvReduce(int peer, uint64_t local_tag, void* dst, size_t count, DataType dtype,
                          ReduceOp op) {
  Request r = transport_.IrecvReduce(peer, tag_base_ | local_tag, dst, count,
                                     ReduceSpec{dtype, op, &kernels::Reduce});
  outstanding_.push_back(r);
  return r;
}

Status Comm::Wait(const Request& request) {
  Status st = transport_.WaitFor(request, timeout_);
  if (st.ok()) return st;
  return Contextualize(st, request->Describe());
}

Status Comm::WindowStep(uint64_t word) {
  Status st = window_->Step(word, Clock::now() + timeout_);
  if (st.ok()) return st;
  return Contextualize(st, st.message());
}

std::string Comm::Where() const {
  return "rank " + std::to_string(rank()) + ": " + collective_ + " (" + algorithm_ + ")";
}

Status Comm::Contextualize(const Status& st, const std::string& what) const {
  const std::string context = Where();
  if (st.code() == StatusCode::kTimeout) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", DurationToSeconds(timeout_));
    return TimeoutError(context + ": timed out after " + secs + " s (HORA_TIMEOUT_S) " + what);
  }
  return st.WithContext(context);
}

void* Comm::Scratch(int slot, size_t bytes) {
  Buffer& b = scratch_.at(static_cast<size_t>(slot));
  if (b.capacity < bytes || b.storage == nullptr) {
    size_t cap = bytes < 4096 ? 4096 : bytes;
    b.storage.reset(new std::byte[cap + 64]);  // uninitialized on purpose
    b.capacity = cap;
    auto addr = reinterpret_cast<uintptr_t>(b.storage.get());
    b.aligned = reinterpret_cast<void*>((addr + 63) & ~uintptr_t{63});
  }
  return b.aligned;
}

CollectiveScope::CollectiveScope(Comm& comm, const char* collective, const char* algorithm)
    : comm_(comm) {
  comm_.Begin(collective, algorithm);
}

CollectiveScope::~CollectiveScope() { comm_.End(); }

}  // namespace hora
