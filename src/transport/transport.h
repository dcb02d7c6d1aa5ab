// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The point-to-point seam every algorithm is written against: asynchronous,
// tagged sends and receives of bytes between the ranks of one group.
//
// Contract:
//  - Isend/Irecv return at once. The buffer must stay valid (and, for a send,
//    unchanged) until the request completes or Cancel() returned.
//  - A receive matches the oldest unmatched send from the same peer with the
//    same tag (messages between a pair with one tag are not reordered).
//  - A send may complete only when its receive is posted (rendezvous), so an
//    algorithm posts its receives before it waits on its sends.
//  - Sizes must match exactly: a receive of N bytes matched with a send of M
//    != N bytes fails both requests with an error naming both sizes.
//  - Cancel() makes a pending request inert: after it returns the transport
//    no longer touches the request's buffer. Used when a collective fails.
//  - IrecvReduce() receives like Irecv but folds the incoming elements into
//    `dst` (dst[i] = op(dst[i], in[i])) instead of storing them, so that a
//    transport that can read the sender's bytes in place (loopback, shared
//    memory) reduces straight from them with no staging copy. It matches an
//    ordinary Isend of count * element-size bytes.
//  - Wait() is where a rank spends time blocked on a request; transports that
//    make progress in the caller's thread (shared memory; TCP for small
//    requests, before it sleeps) do it there. The default waits for
//    completion by another thread.
//  - Window() offers memory every rank reads directly (shared_window.h),
//    where the ranks share it (loopback, shm); the others have none.
//  - Implementations: loopback/ (ranks as threads), shm/, tcp/ and mpi/
//    (built only into the MPI plugins, mpi/mpi_plugin.h, loaded at run
//    time). combinators/hybrid/ (shm within a host, TCP across) and
//    combinators/subset/ (a process set's view) are built from other
//    transports.
//
// Thread-safety: several threads may use one Transport at once (a Session's
// caller and its engine, whose Comms use disjoint tag contexts); requests
// complete from any thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hora/types.h"
#include "transport/request.h"
#include "transport/shared_window.h"

namespace hora {

using Tag = uint64_t;

// How IrecvReduce combines incoming elements: `reduce(dtype, op, dst, src,
// count)` computes dst[i] = op(dst[i], src[i]). The collectives layer passes
// its kernels here, so transports do not depend on them.
struct ReduceSpec {
  DataType dtype;
  ReduceOp op;  // never kAverage
  void (*reduce)(DataType dtype, ReduceOp op, void* dst, const void* src, size_t count);
};

// The error every transport gives a request naming a peer outside the group
// (or itself): "rank 2: invalid peer 7 (world size 4)".
inline Status InvalidPeerError(int rank, int peer, int size) {
  return InvalidArgument("rank " + std::to_string(rank) + ": invalid peer " + std::to_string(peer) +
                         " (world size " + std::to_string(size) + ")");
}

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "loopback", "shm", "tcp", "mpi".
  virtual const char* name() const = 0;

  virtual Request Isend(int peer, Tag tag, const void* data, size_t bytes) = 0;
  virtual Request Irecv(int peer, Tag tag, void* data, size_t bytes) = 0;
  virtual Request IrecvReduce(int peer, Tag tag, void* dst, size_t count,
                              const ReduceSpec& spec) = 0;
  virtual void Cancel(const Request& request) = 0;

  // Blocks until `request` completes or `deadline` passes (then a Timeout
  // status describing the request). Must be bounded by `deadline`.
  virtual Status Wait(const Request& request, TimePoint deadline) {
    return request->Wait(deadline);
  }
  // Wait, calling `also` (non-blocking: moves another transport, true if
  // anything moved) whenever the wait would otherwise idle, at least every
  // 200 us: a transport that combines several waits on one this way
  // (HybridTransport). The default sleeps on the request between calls;
  // TCP moves a small request's socket itself meanwhile, as its Wait does.
  virtual Status WaitAlso(const Request& request, TimePoint deadline,
                          const std::function<bool()>& also) {
    while (!request->done()) {
      if (also()) continue;
      const TimePoint now = Clock::now();
      if (now >= deadline) return TimeoutError("timed out " + request->Describe());
      (void)request->Wait(std::min(deadline, now + std::chrono::microseconds(200)));
    }
    return request->status();
  }
  // The same bounded by `timeout` from now. Transports that spin override it
  // to read the clock only once the spin has gone on for a while (a clock
  // read can cost as much as a small message).
  virtual Status WaitFor(const Request& request, Duration timeout) {
    if (request->done()) return request->status();
    return Wait(request, Clock::now() + timeout);
  }

  // Moves pending work forward without blocking; returns whether anything
  // moved. Transports that progress in the caller's thread (shared memory;
  // TCP, beside its I/O thread) do something here; a transport that combines
  // several calls it on the others while it waits on one.
  virtual bool Progress() { return false; }

  // Whether rank `to` reads a send of `bytes` from rank `from` straight
  // from the sender's memory (shared memory's single copy): such a send
  // holds no copy of its own and completes once read, so posting many at
  // once costs the sender nothing. Every rank of a host gives the same
  // answer about a pair of that host, and every rank says no about a pair
  // across hosts; about a pair of another host a rank may say no where that
  // host's ranks say yes. So a question about every pair of the group is
  // answered alike everywhere; one about some pairs only within a host.
  // Cheap; from any thread.
  virtual bool ReadsInPlace(int from, int to, size_t bytes) {
    (void)from;
    (void)to;
    (void)bytes;
    return false;
  }

  // A send that rank `peer` may read straight from `data` (a single copy)
  // where this transport can (ReadsOnRequest), whatever its size: for an
  // algorithm whose sender has other work for its core meanwhile, so that
  // the peer's read of it overlaps that work. Such a send completes once
  // read. Elsewhere an Isend.
  virtual Request IsendInPlace(int peer, Tag tag, const void* data, size_t bytes) {
    return Isend(peer, tag, data, bytes);
  }
  // Whether rank `to` reads rank `from`'s IsendInPlace straight from its
  // memory; answered alike about a pair as ReadsInPlace is. Cheap; from any
  // thread.
  virtual bool ReadsOnRequest(int from, int to) {
    (void)from;
    (void)to;
    return false;
  }

  // Why this group can no longer complete a collective -- a peer lost
  // (its process ended, its connection closed, it fell silent), named --
  // or OK. Waits fail on their own when that happens; a long wait also
  // asks this between its slices (Comm), so that a wait on a peer that is
  // alive fails when another was lost. Cheap; from any thread.
  virtual Status LostPeer() { return Status::Ok(); }

  // The peer whose silence lost this group (no heartbeat for the peer
  // timeout: its process stopped or frozen, not ended), or -1: no peer
  // lost, or lost another way. Cheap; from any thread.
  virtual int SilentPeer() { return -1; }

  // The window of tag context `context` (shared_window.h), or null where the
  // transport has none; the same object on every call, owned by the
  // transport. Every rank of the group gets one or none alike.
  virtual SharedWindow* Window(uint32_t context) {
    (void)context;
    return nullptr;
  }

  // This rank's side of the windows of the group of `ranks` (this
  // transport's ranks, sorted, this rank's among them; shared_window.h,
  // GroupWindows), which every member asks for with the same `key`
  // (unique among the transport's groups, never reused); null where the
  // transport has no windows (alike on every rank). An error (no memory
  // for it) is this rank's alone: the members must agree to go without.
  virtual Result<std::unique_ptr<PendingGroupWindows>> PrepareGroupWindows(
      std::span<const int> ranks, uint64_t key) {
    (void)ranks;
    (void)key;
    return std::unique_ptr<PendingGroupWindows>();
  }

  // Where this transport spans hosts and reaches the ranks of this one
  // through a transport of their own (shared memory, with its windows):
  // that transport, owned by this one, and in `*ranks` this transport's
  // rank of each of its ranks. Null elsewhere.
  virtual Transport* ThisHost(std::vector<int>* ranks) {
    (void)ranks;
    return nullptr;
  }
};

}  // namespace hora
