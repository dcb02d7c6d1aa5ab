// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/comm.h"

#include <algorithm>
#include <cstdio>

#include "common/units.h"
#include "kernels/reduce.h"

namespace hora {

namespace {

// A long wait looks up at least this often: to report it, to fail it at the
// timeout.
constexpr Duration kLongestSlice = std::chrono::seconds(1);

}  // namespace

Comm::Comm(Transport& transport, WaitPolicy waits, size_t segment_bytes, uint32_t context,
           SharedWindow* window)
    : transport_(transport),
      waits_(waits),
      segment_bytes_(segment_bytes),
      context_bits_(static_cast<uint64_t>(context % kMaxContexts) << tag_layout::kContextShift),
      window_(window != nullptr ? window : transport.Window(context % kMaxContexts)),
      scratch_(4) {}

Comm::~Comm() { End(); }

void Comm::Begin(const char* collective, const char* algorithm) {
  End();
  collective_ = collective;
  algorithm_ = algorithm;
  ++sequence_;
  tag_base_ =
      context_bits_ | ((sequence_ & tag_layout::kSequenceMask) << tag_layout::kSequenceShift);
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

Request Comm::IsendInPlace(int peer, uint64_t local_tag, const void* data, size_t bytes) {
  Request r = transport_.IsendInPlace(peer, tag_base_ | local_tag, data, bytes);
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
  const Duration first = waits_.FirstSlice(kLongestSlice);
  Status st = transport_.WaitFor(request, first);
  if (request->done()) {
    st = request->status();
  } else if (st.code() == StatusCode::kTimeout) {
    return WaitLong([&](TimePoint deadline) { return transport_.Wait(request, deadline); },
                    [&] { return "rank " + std::to_string(request->peer()); },
                    [&] { return request->Describe(); }, first);
  }
  return st.ok() ? st : Contextualize(st);
}

Status Comm::WindowStep(uint64_t word) {
  Status st = window_->Start(word);
  const Duration first = waits_.FirstSlice(kLongestSlice);
  if (st.ok()) st = window_->Await(Clock::now() + first);
  if (st.code() == StatusCode::kTimeout) {
    st = WaitLong([&](TimePoint deadline) { return window_->Await(deadline); },
                  [&] { return window_->Missing(); },
                  [] { return std::string("in shared memory"); }, first);
    // A step given up (the timeout) leaves the ranks' step counts apart.
    if (!st.ok()) window_->Abandon(st);
    return st;
  }
  return st.ok() ? st : Contextualize(st);
}

Status Comm::WaitLong(const std::function<Status(TimePoint)>& wait,
                      const std::function<std::string()>& who,
                      const std::function<std::string()>& what, Duration waited) {
  const TimePoint start = Clock::now() - waited;
  const bool reports = waits_.report_every > Duration::zero() && waits_.logger != nullptr;
  const TimePoint end =
      waits_.timeout > Duration::zero() ? DeadlineAfter(start, waits_.timeout) : TimePoint::max();
  TimePoint next_report = reports ? DeadlineAfter(start, waits_.report_every) : TimePoint::max();
  // "rank 1: allreduce (ring)", or with a subject "rank 1: barrier"; then
  // "rank 2 (receiving 8 B from rank 2)", or with a subject "rank 2 (engine
  // negotiation, bit-vector AND: ...)".
  auto head = [&] {
    return subject_ ? "rank " + std::to_string(Number(rank())) + ": " + subject_() : Where();
  };
  auto waiting_for = [&] {
    std::string detail = what();
    if (subject_) {
      detail = std::string(collective_) + ", " + algorithm_ + (detail.empty() ? "" : ": ") + detail;
    }
    return who() + " (" + detail + ")";
  };
  for (;;) {
    // A peer lost elsewhere in the group (not the one waited for): the wait
    // can never end.
    if (Status lost = transport_.LostPeer(); !lost.ok()) return Contextualize(lost);
    const TimePoint now = Clock::now();
    if (now >= end) {
      return TimeoutError(head() + ": timed out after " + FormatSeconds(waits_.timeout) +
                          " s (HORA_TIMEOUT_S) waiting for " + waiting_for());
    }
    if (now >= next_report) {
      waits_.logger->Warning("stall: " + head() + " has waited " + FormatSeconds(now - start) +
                             " s for " + waiting_for());
      next_report = DeadlineAfter(next_report, waits_.report_every);
    }
    const TimePoint until = std::min({end, next_report, DeadlineAfter(now, kLongestSlice)});
    Status st = wait(until);
    if (st.code() != StatusCode::kTimeout) return st.ok() ? st : Contextualize(st);
  }
}

std::string Comm::Where() const {
  return "rank " + std::to_string(Number(rank())) + ": " + collective_ + " (" + algorithm_ + ")";
}

Status Comm::Contextualize(const Status& st) const {
  if (!subject_) return st.WithContext(Where());
  return st.WithContext("rank " + std::to_string(Number(rank())) + ": " + subject_());
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

void CollectiveScope::SetAlgorithm(const char* algorithm) { comm_.algorithm_ = algorithm; }

}  // namespace hora
