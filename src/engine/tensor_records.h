// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The engine's record of each tensor name. Once a name's tensor is finished
// its record stays, idle, for the next tensor of that name (a training step
// submits the same names every step), so that a steady step allocates no
// record and hashes each name once, when it is submitted. Records of names
// that never come back (not cacheable: generated names) go at once, and of
// the idle ones the least recently used go beyond a number kept.
//
// Not thread-safe: the engine calls it under its lock. Whoever holds a
// tensor in flight (the queue, then the cycle) uses its record without the
// lock: nothing else touches it until it is released.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "common/clock.h"
#include "common/intrusive_list.h"
#include "engine/handle_state.h"
#include "engine/negotiator.h"

namespace hora {

// One tensor submitted on this rank.
struct Submission {
  RequestMeta meta;  // (its shape: see shape_of)
  // When set, the tensor's shape, and meta.shape is left empty: the
  // caller's vector, valid until Engine::Submit (or SubmitGroup) returns,
  // which copies it, if it queues the tensor, into the vector of the name's
  // record. That vector stays with the record from one tensor of the name
  // to the next, so a steady step allocates no shapes.
  const std::vector<int64_t>* shape_of = nullptr;
  // Likewise the name: when set, meta.name is left empty. A name's record
  // keeps a copy of it from its first tensor on, so a steady step copies no
  // names.
  const std::string* name_of = nullptr;
  const std::string& name() const { return name_of != nullptr ? *name_of : meta.name; }
  // The caller's buffers (meta and shape_of describe them): plain pointers.
  void* input = nullptr;
  void* output = nullptr;
};

// A name's record. Its Ticket (meta, buffers, the negotiator's state) is the
// tensor as the negotiator sees it.
struct TensorRecord : Ticket {
  // Clears what one tensor left behind (not the cache hint and generation,
  // not links).
  void Reset();

  // Its completion, while in flight (Engine::Claim made it).
  Handle handle;
  // The completions of the name's last two tensors, kept for its next ones
  // (Handle::State::Renew) unless they carry an output; they stay through
  // Reset. Two: a caller that keeps each handle until it has the next
  // tensor's (`handles[i] = AllreduceAsync(...)`) still holds the last one.
  Handle kept[2];
  // Of its Submission (whose meta and buffers went to the Ticket):
  TimePoint submitted{};              // when it was queued, only while a timeline records
  bool in_flight = false;             // submitted and not yet finished
  bool listed = false;                // taken by a cycle (on the negotiator's list)
  bool idle = false;                  // kept for the name's next tensor
  TensorRecord* idle_prev = nullptr;  // the idle list's links
  TensorRecord* idle_next = nullptr;
  std::vector<int64_t> rows;     // from the decision (allgather, alltoall)
  std::optional<Tensor> result;  // an output Hora allocated
  std::vector<int64_t> received_splits;
  // GPU tensors: the results' copy back, still under way (device_done.h).
  std::shared_ptr<DeviceDone> on_device;
  // Its number in the rank's order of NCCL calls (nccl_order.h), where NCCL
  // may take it; 0 otherwise.
  uint64_t nccl_number = 0;
  // A joined rank's placeholder for a tensor it never submitted: identity
  // values in `scratch`, no handle (the engine's, not in these records).
  bool phantom = false;
  std::optional<Tensor> scratch;
};

class TensorRecords {
 public:
  // Keeps at most `keep` idle records.
  explicit TensorRecords(size_t keep) : keep_(keep) {}

  // The record of `name`: a new one, an idle one, or the one in flight.
  TensorRecord& Get(const std::string& name) { return by_name_[name]; }
  TensorRecord* Find(const std::string& name);
  // Gives `r` (not in flight) to submission `s`: in flight from here on.
  // `stamp`: note when (TensorRecord::submitted).
  void Claim(TensorRecord& r, Submission&& s, bool stamp);
  // `r`'s tensor is finished (its record reset): kept idle, or dropped.
  void Release(TensorRecord* r);
  size_t size() const { return by_name_.size(); }

 private:
  const size_t keep_;
  std::unordered_map<std::string, TensorRecord> by_name_;
  // The idle records, least recently used first: a record leaves when a
  // tensor claims it and joins at the back when its tensor is finished.
  IntrusiveList<TensorRecord, &TensorRecord::idle_prev, &TensorRecord::idle_next> idle_;
};

// A joined rank's placeholders: for each allreduce the other ranks run that
// this rank (out of data) has no tensor of, a record of identity values
// that it reduces instead; made and finished in one cycle.
class Placeholders {
 public:
  // A placeholder for allreduce `r`, its identity values from `data`.
  TensorRecord* Add(const Response& r, CollectiveBackend& data);
  void Remove(const TensorRecord* p) { by_name_.erase(by_name_.find(p->meta.name)); }
  template <typename F>
  void ForEach(F&& f) {
    for (auto& [name, p] : by_name_) f(&p);
  }

 private:
  std::unordered_map<std::string, TensorRecord> by_name_;
};

}  // namespace hora
