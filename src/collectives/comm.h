// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Comm: what an algorithm sees of the world. It wraps the rank's Transport
// with (1) tags unique to each collective call, (2) waits that fail when a
// peer is lost, report a peer that is slow, and fail at the collective
// timeout if one is set (WaitPolicy), whose messages name the rank, the
// collective and the peer, (3) cancellation of everything still pending when
// a collective returns early, and (4) reusable scratch buffers.
//
// Usage inside an algorithm:
//   CollectiveScope scope(comm, "allreduce", "ring");
//   Request r = comm.Irecv(left, Tag(step, seg), tmp, bytes);
//   HORA_RETURN_IF_ERROR(comm.Wait(r));
//
// Every rank must run the same sequence of collectives on a Comm (as in MPI):
// tags are derived from a per-Comm call counter. Not thread-safe: one
// collective at a time per Comm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/config.h"
#include "common/wait_policy.h"
#include "transport/tag_layout.h"
#include "transport/transport.h"

namespace hora {

class Comm {
 public:
  // Tags: transport/tag_layout.h. Comms over one transport with different
  // contexts never match each other's messages (the Session's own calls
  // use context 0; the engine of process set k its data 2k+1 and its
  // control 2k+2, k = 0 being the global set).
  static constexpr uint32_t kMaxContexts = tag_layout::kMaxContexts;

  // `window`: the shared window this Comm steps on, where not its
  // transport's for `context` (null: that one). A Comm among a host's ranks
  // of a job spanning hosts steps on the shared-memory transport's window,
  // which the transport it sends over does not offer (backends/host_tiers.h).
  Comm(Transport& transport, WaitPolicy waits, size_t segment_bytes, uint32_t context = 0,
       SharedWindow* window = nullptr);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const { return transport_.rank(); }
  int size() const { return transport_.size(); }
  Transport& transport() const { return transport_; }

  // The numbers its messages give this Comm's ranks: rank k is "rank
  // numbers[k]" (a Comm among some of a job's ranks names them as the job
  // does; its peers are named by its transport's requests). Unset: their
  // own.
  void SetRankNumbers(std::vector<int> numbers) { numbers_ = std::move(numbers); }
  int Number(int k) const {
    return k >= 0 && static_cast<size_t>(k) < numbers_.size() ? numbers_[static_cast<size_t>(k)]
                                                              : k;
  }
  size_t segment_bytes() const { return segment_bytes_; }
  // HORA_BLOCKS_AT_ONCE for this Comm's allgather, alltoall and
  // scatter-allgather broadcast (blocks_at_once.h); alike on every rank.
  BlocksAtOnce blocks_at_once() const { return blocks_at_once_; }
  void SetBlocksAtOnce(BlocksAtOnce mode) { blocks_at_once_ = mode; }
  const WaitPolicy& waits() const { return waits_; }

  // What this Comm's collectives are for, in the user's terms ("allreduce
  // 'grad.fc1.weight' and 3 more"), asked only when a wait is reported or
  // fails: the engine sets it on its control Comm, whose collectives are its
  // negotiation. Called on the thread that waits. Unset: the collective's
  // own name.
  void SetSubject(std::function<std::string()> subject) { subject_ = std::move(subject); }

  // Local tags: algorithms number their messages with (phase, step, segment);
  // Comm adds the call sequence number so calls never cross.
  static uint64_t LocalTag(uint32_t phase, uint32_t step, uint32_t segment) {
    using namespace tag_layout;
    return ((phase & kPhaseMask) << kPhaseShift) | ((step & kStepMask) << kStepShift) |
           (segment & kSegmentMask);
  }

  Request Isend(int peer, uint64_t local_tag, const void* data, size_t bytes);
  // A send the peer may read in place (Transport::IsendInPlace).
  Request IsendInPlace(int peer, uint64_t local_tag, const void* data, size_t bytes);
  Request Irecv(int peer, uint64_t local_tag, void* data, size_t bytes);
  // Receives `count` elements and folds them into `dst` with `op` (the
  // transport's IrecvReduce, with Hora's kernels). `dst` must not be read or
  // written by anyone else until the request completes.
  Request IrecvReduce(int peer, uint64_t local_tag, void* dst, size_t count, DataType dtype,
                      ReduceOp op);

  // Waits for one request (see WaitPolicy). An error is returned with the
  // collective's context: "rank 2: allreduce (ring): rank 1 (pid 42) is gone:
  // ...", "rank 2: allreduce (ring): timed out after 30 s (HORA_TIMEOUT_S)
  // waiting for rank 1 (receiving 64 KiB from rank 1)"; with a subject,
  // "rank 2: allreduce 'w': ..." (SetSubject).
  Status Wait(const Request& request);

  // The transport's shared window for this Comm's context, or null where it
  // has none (transport/shared_window.h); for the *_shared algorithms.
  SharedWindow* window() const { return window_; }
  // One step of the window (SharedWindow::Step), waited for as Wait waits;
  // an error carries the collective's context like Wait's.
  Status WindowStep(uint64_t word);

  // "rank R: <collective> (<algorithm>)", the start of the running
  // collective's errors.
  std::string Where() const;

  // Scratch memory owned by the Comm, 64-byte aligned, reused across calls.
  // `slot` selects one of a few independent buffers.
  void* Scratch(int slot, size_t bytes);

 private:
  friend class CollectiveScope;
  // `collective` and `algorithm` are string literals (kept as pointers, so
  // starting a collective allocates nothing).
  void Begin(const char* collective, const char* algorithm);
  void End();
  // `st` (a failed wait) with "rank R: <collective> (<algorithm>)" before it.
  Status Contextualize(const Status& st) const;
  // A wait that outlasted its first slice: `wait(deadline)` waits one more
  // slice (a Timeout status when it ends first); `who` names the ranks
  // waited for and `what` the wait ("receiving 64 KiB from rank 1"), both
  // asked only for a report or the timeout's error.
  Status WaitLong(const std::function<Status(TimePoint)>& wait,
                  const std::function<std::string()>& who, const std::function<std::string()>& what,
                  Duration waited);

  Transport& transport_;
  const WaitPolicy waits_;
  std::function<std::string()> subject_;
  std::vector<int> numbers_;  // SetRankNumbers
  const size_t segment_bytes_;
  BlocksAtOnce blocks_at_once_ = BlocksAtOnce::kAuto;
  const uint64_t context_bits_;
  SharedWindow* const window_;
  uint64_t sequence_ = 0;
  uint64_t tag_base_ = 0;
  const char* collective_ = "";       // "allreduce" while a collective runs
  const char* algorithm_ = "";        // "ring"
  std::vector<Request> outstanding_;  // requests of the running collective
  struct Buffer {
    std::unique_ptr<std::byte[]> storage;
    size_t capacity = 0;
    void* aligned = nullptr;
  };
  std::vector<Buffer> scratch_;
};

// Marks one collective call: gives it fresh tags and an error context, and on
// destruction cancels whatever it left pending (so an early error return
// never leaves the transport holding the caller's buffers).
class CollectiveScope {
 public:
  CollectiveScope(Comm& comm, const char* collective, const char* algorithm);
  ~CollectiveScope();
  CollectiveScope(const CollectiveScope&) = delete;
  CollectiveScope& operator=(const CollectiveScope&) = delete;

  // The algorithm's name once it is decided inside the scope (a string
  // literal): what errors and stall reports name from here on.
  void SetAlgorithm(const char* algorithm);

 private:
  Comm& comm_;
};

}  // namespace hora
