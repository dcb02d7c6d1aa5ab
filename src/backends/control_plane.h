// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The seam through which an engine's negotiation (engine/negotiator.h) talks
// to the other ranks of its process set: the AND of a vector of words, the
// same AND carrying the cycle's cached allreduce, and the gather and
// broadcast of byte vectors. Every rank makes the same sequence of calls.
// The one Hora runs on is CreateCommControlPlane (comm_control_plane.h); the
// negotiator's unit tests run on a fake.
//
// Not thread-safe: the cycle's thread uses it, one call at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "collectives/algorithms.h"
#include "hora/status.h"

namespace hora {

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // words[i] = AND over ranks of words[i].
  virtual Status And(std::span<uint64_t> words) = 0;
  // Whether AndCarrying can carry an allreduce of `bytes` bytes along with
  // `words` words; with `bytes` 0, whether it can carry any.
  virtual bool CanCarry(size_t words, size_t bytes) = 0;
  // And, with `carried` (null: nothing) sent in the same step where it can
  // be (CanCarry). True when every rank carried the same allreduce and every
  // rank's words but the last (the status word) were equal: the allreduce
  // then ran to its end, its outputs written. False otherwise, with nothing
  // written to the outputs. `words` holds the AND either way.
  virtual Result<bool> AndCarrying(std::span<uint64_t> words, const CarriedAllreduce* carried) = 0;
  // Whether a rank has already entered the next And of `words` words and
  // waits for this one; nullopt where the control plane cannot tell.
  virtual std::optional<bool> PeerWaiting(size_t words) const = 0;

  // Every rank's `mine` arrives at `root`, in rank order (others get nothing).
  virtual Result<std::vector<std::vector<uint8_t>>> Gather(int root,
                                                           const std::vector<uint8_t>& mine) = 0;
  // root's `data` replaces `data` on every rank.
  virtual Status Broadcast(int root, std::vector<uint8_t>& data) = 0;

  // What the calls' progress reports and timeouts name ("allreduce 'w' and 3
  // more tensors"), asked on the calling thread; null: nothing.
  virtual void SetSubject(std::function<std::string()> subject) = 0;

  // Why the ranks can no longer meet (a peer lost, named: the transport's
  // LostPeer), or OK. Cheap; from any thread.
  virtual Status LostPeer() const { return Status::Ok(); }
};

}  // namespace hora
