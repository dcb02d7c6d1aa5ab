// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// SharedWindow: memory that every rank of a group reads directly, offered by
// transports whose ranks share an address space or a host (loopback, shm)
// beside their point-to-point seam (transport.h). Collectives written on it
// (collectives/*_shared.cc) copy a rank's data once into its own region and
// let every other rank read it in place, in a few lockstep steps instead of
// the 2(n-1) or 2 log2(n) message rounds of the point-to-point algorithms.
//
// Each rank owns one region of bytes() per window: it alone writes it, and
// any rank may read it. Rank order is kept by steps:
//   rank r:  write its region;  Step(word);  read any region;  ...
// Step(word) publishes `word` and this rank's next step number, then waits
// until every rank of the group has made as many steps. Writes made to the
// local region before a Step are visible to every rank once its own Step
// returns. After Step returns, word(k) is what rank k published with that
// step (until this rank's next Step), so the first step of a collective can
// check that every rank called the same collective with the same size.
//
// Reuse rule: data a rank published with step s is read by the others before
// they publish step s + 1 (collectives keep to this), so its owner may write
// that place again once its own Step s + 1 has returned. The same holds for
// data published by a step of another window of the same ranks, made in
// the same order on every rank (the engine's data carried with a control
// step, collectives/bitwise_and.h): its readers are done with it before their next
// step on either window. Collectives that
// write a place at step s and read it again after step s + 1 (a reduced
// piece gathered by everyone) alternate the two halves of the region
// (NextHalf()).
//
// Failure: a Step bounded by its deadline fails naming the ranks that had not
// arrived; a Step fails soon after a rank of the group is gone (shm: once the
// waiter's poll ends and it wakes, within a 50 ms sleep, and for a process
// that died within the next 10 ms liveness check, or that showed no sign of
// life for the peer timeout; loopback: at its next look) when its process
// ended or it closed its transport. The ranks' step counts may then
// disagree, so the window stays broken(): every later Step fails at once
// (Unavailable, quoting the first error), and collectives go back to the
// point-to-point algorithms. A caller that waits in slices (Comm: it reports
// a long wait, and fails it only at its own timeout) uses Start and Await,
// whose timeout leaves the step open.
//
// Which windows exist: one per tag context of the global group's Comms
// (Comm's layout: 0 the Session's own calls, 1 its engine's data, 2 its
// engine's control), of SharedWindowBytes(context) bytes. A process set on
// a transport with windows gets its own pair, for its engine's data and
// control (GroupWindows below, made by its members together). Transports
// spanning hosts have none and use the point-to-point algorithms.
//
// Thread-safety: one thread at a time per window (a Comm's collectives).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/clock.h"
#include "hora/status.h"

namespace hora {

// The tag contexts that have a window, and each one's bytes per rank.
inline constexpr uint32_t kSharedWindowContexts = 3;
inline constexpr size_t SharedWindowBytes(uint32_t context) {
  // The control context carries bit vectors (a bit per cached tensor; the
  // cached allreduce that may go with them goes in the data context's
  // window, collectives/bitwise_and.h): small, so that a job of many ranks still
  // fits a container's 64 MiB /dev/shm (the shm transport reserves its
  // segments).
  return context == 2 ? size_t{64} << 10 : size_t{2} << 20;
}

class SharedWindow {
 public:
  SharedWindow(int rank, int size) : rank_(rank), size_(size) {}
  virtual ~SharedWindow() = default;
  SharedWindow(const SharedWindow&) = delete;
  SharedWindow& operator=(const SharedWindow&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Bytes of each rank's region (a multiple of 4 KiB).
  virtual size_t bytes() const = 0;
  // This rank's region, and rank k's (k may be this rank), 64-byte aligned.
  virtual std::byte* local() = 0;
  virtual const std::byte* region(int k) const = 0;

  // See above. Errors name this rank's step and the ranks missing.
  Status Step(uint64_t word, TimePoint deadline) {
    HORA_RETURN_IF_ERROR(Start(word));
    Status st = Await(deadline);
    if (!st.ok()) Abandon(st);
    return st;
  }
  // Step in two halves. Start publishes `word` with this rank's next step
  // number; Await waits until every rank has reached it, or until
  // `deadline`: a Timeout status then leaves the step open (Await again),
  // and any other failure breaks the window. A caller that gives up on an
  // open step calls Abandon: the ranks' step counts may then disagree.
  Status Start(uint64_t word) {
    if (!broken_.ok()) return broken_;
    Publish(word);
    return Status::Ok();
  }
  Status Await(TimePoint deadline) {
    Status st = WaitStep(deadline);
    if (!st.ok() && st.code() != StatusCode::kTimeout) Abandon(st);
    return st;
  }
  void Abandon(const Status& why) {
    if (broken_.ok()) {
      broken_ = UnavailableError("the shared-memory window is unusable after an earlier failure (" +
                                 why.ToString() + ")");
    }
  }
  bool broken() const { return !broken_.ok(); }
  // "rank 3" or "ranks 3, 5": the ranks that have not reached this rank's
  // last step.
  virtual std::string Missing() const = 0;
  virtual uint64_t word(int k) const = 0;
  // Some rank has begun a step that this rank has not: it waits for this one.
  virtual bool PeerAhead() const = 0;

  // 0, 1, 0, 1, ...: the half of the region a collective's next chunk uses
  // (the same sequence on every rank, as all make the same calls).
  size_t NextHalf() { return static_cast<size_t>(halves_++ & 1u); }
  // How many times NextHalf() was called.
  uint64_t halves() const { return halves_; }

 protected:
  // Publishes `word` with this rank's next step number (Start).
  virtual void Publish(uint64_t word) = 0;
  // Waits for every rank to reach this rank's last step (Await): a Timeout
  // at `deadline`, which the step survives; any other error when the step
  // can never complete.
  virtual Status WaitStep(TimePoint deadline) = 0;

 private:
  const int rank_;
  const int size_;
  uint64_t halves_ = 0;
  Status broken_;
};

// The windows of some of a transport's ranks (a process set): a data and a
// control window (contexts 1 and 2's sizes, SharedWindowBytes), in which
// rank i is the group's i-th rank. Made by every member in the same order
// (api/process_set_windows.cc): each prepares its side
// (Transport::PrepareGroupWindows), the members exchange their tokens, each
// opens the others' sides with them, and once every member has, each seals
// its own (its memory loses its name: nothing is left behind, whatever
// happens to the processes). Owned by the group's user; the transport
// outlives them.
class GroupWindows {
 public:
  virtual ~GroupWindows() = default;
  // 1: the data window; 2: the control window; null otherwise.
  virtual SharedWindow* Window(uint32_t context) = 0;
  virtual Status Seal() = 0;
};

class PendingGroupWindows {
 public:
  virtual ~PendingGroupWindows() = default;
  // What the other members need to reach this rank's side (not empty).
  virtual const std::string& token() const = 0;
  // `tokens[i]`: the group's i-th rank's token (this rank's included).
  virtual Result<std::unique_ptr<GroupWindows>> Open(std::span<const std::string> tokens) = 0;
};

}  // namespace hora
