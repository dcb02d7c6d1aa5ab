// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// One order of NCCL calls on every rank, across a rank's process sets.
//
// NCCL asks two things of communicators used together on one GPU: their
// calls are made by one thread at a time, and in one order on every rank
// (a GPU may run one set's kernel while the kernel another rank queued
// first waits behind it: then neither ends). Here that holds for their
// collectives' calls; a communicator's making and abort are not ordered. Each process set's engine
// decides and runs its batches on its own thread, so by themselves two sets
// that share ranks would reach NCCL in whatever order their negotiations
// happened to end on each rank.
//
// The order kept here is the order in which this rank's tensors were
// submitted: Submitted numbers them, across every set. A batch's place is
// the number of its first-submitted tensor, or its set's last batch's place
// where that is later (a set runs its batches in the order its ranks agreed
// on). A batch makes its calls in a turn (Await) that one set holds at a
// time, and only once no other set can still have a batch with an earlier
// place: each other set's place is that of its batch waiting for a turn, or
// else at least the number of its earliest tensor not yet run, and its last
// batch's place. Where the tensors of all the sets follow one order that
// every rank submits its own in (not one order per pair of sets: three sets
// sharing a rank pairwise could still wait in a circle), the places of any
// two batches compare alike on every rank (each is the number of one
// tensor, the same one everywhere), so every rank makes their calls in one
// order.
//
// A batch awaits its turn once its set's ranks agreed to make its calls
// (batch_verdict.h), so every rank of the set awaits the same batches, and
// a batch's place counts as its set's last whether its turn comes or not.
// The turn is held only while the calls are queued.
//
// The order holds on the GPU too. Each set works on a stream of its own,
// so a GPU could run a later turn's kernels before an earlier one's (one
// set's stream held back by its copies), and NCCL's kernels of two
// communicators, each waiting for its peers, may then wait for each other
// (NCCL asks that communicators used together be ordered on the GPU, not
// only in their calls). So a turn leaves a Mark after its calls (an event
// on its set's stream: device_staging_nccl.cc), and the next turn of
// another set makes its stream wait for that mark before its calls.
//
// A tensor leaves the order when its batch's turn ends, or when it is
// finished another way (Finished: on Hora's own paths, failed, cancelled).
//
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>

#include "common/clock.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "hora/status.h"

namespace hora {

class NcclOrder {
 public:
  // The next number, for a tensor of process set `set` that NCCL may take.
  // `name` names it in Await's warnings and errors: it must stay valid until
  // the tensor leaves the order.
  uint64_t Submitted(int set, const std::string* name) HORA_EXCLUDES(mu_);
  // The tensor numbered `number` of `set` will make no NCCL call (0: none).
  void Finished(int set, uint64_t number) HORA_EXCLUDES(mu_);

  // What a turn leaves on the GPU after its calls, for the next turn of
  // another set to wait for (its owner's kind: device_staging.h).
  class Mark {
   public:
    virtual ~Mark() = default;
  };

  // A set's turn: while one is held, no other set's batch makes calls. Its
  // end takes its batch's tensors out of the order.
  class Turn {
   public:
    Turn() = default;
    Turn(Turn&& o) noexcept;
    Turn& operator=(Turn&& o) noexcept;
    ~Turn() { End(); }
    void End();

    // Whether it is held (not the empty turn of a set with no order).
    bool held() const { return order_ != nullptr; }
    // The mark the last turn left, where that was another set's (null: none).
    const std::shared_ptr<const Mark>& previous() const { return previous_; }
    // This turn's calls are followed by `mark`, for the turns after it.
    void Leave(std::shared_ptr<const Mark> mark);

   private:
    friend class NcclOrder;
    Turn(NcclOrder* order, int set, std::span<const uint64_t> numbers,
         std::shared_ptr<const Mark> previous)
        : order_(order), set_(set), numbers_(numbers), previous_(std::move(previous)) {}
    NcclOrder* order_ = nullptr;
    int set_ = 0;
    std::span<const uint64_t> numbers_;
    std::shared_ptr<const Mark> previous_;
  };

  struct Wait {
    // At most this long (zero or less: as long as it takes), saying what it
    // waits for every `warn_every` (zero: never) as `logger`'s warning.
    Duration timeout{};
    Duration warn_every{};
    const Logger* logger = nullptr;
    // Names the batch in warnings: "rank 1: allreduce 'grad' of process set
    // 1 (ranks 0, 1)" (made only when one is said). Errors leave it to the
    // caller's context.
    std::function<std::string()> what;
  };
  // Waits for the turn of `set`'s batch of the tensors numbered `numbers`
  // (the caller's, valid while the turn is held; 0s are skipped): a
  // timeout fails it, naming what it waited for, and so does Cancel where
  // it cannot have its turn at once.
  Result<Turn> Await(int set, std::span<const uint64_t> numbers, const Wait& wait)
      HORA_EXCLUDES(mu_);

  // `set`'s engine stops: from now on its batches that would wait for a
  // turn fail instead.
  void Cancel(int set) HORA_EXCLUDES(mu_);
  // `set` ended (its tensors finished): forgotten.
  void Forget(int set) HORA_EXCLUDES(mu_);

 private:
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
  struct SetOrder {
    std::map<uint64_t, const std::string*> unrun;  // its tensors still in the order
    uint64_t last = 0;                             // its last batch's place
    uint64_t waiting = 0;                          // its batch awaiting a turn: the place (0: none)
    bool cancelled = false;
  };
  // The earliest place `s`'s next batch can have (kNever: it has none).
  static uint64_t Earliest(const SetOrder& s);
  // The set, other than `set`, whose next batch may come before `place`
  // (holding the turn, or Earliest), or nullptr.
  const std::pair<const int, SetOrder>* Before(int set, uint64_t place) const HORA_REQUIRES(mu_);
  // "process set 2's 'grad.7' (submitted before it on this rank)", for `before`.
  std::string Describe(const std::pair<const int, SetOrder>& before) const HORA_REQUIRES(mu_);
  void EndTurn(int set, std::span<const uint64_t> numbers) HORA_EXCLUDES(mu_);
  void LeaveMark(int set, std::shared_ptr<const Mark> mark) HORA_EXCLUDES(mu_);

  Mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ HORA_GUARDED_BY(mu_) = 1;
  std::unordered_map<int, SetOrder> sets_ HORA_GUARDED_BY(mu_);
  static constexpr int kNobody = std::numeric_limits<int>::min();
  int holder_ HORA_GUARDED_BY(mu_) = kNobody;              // the set holding the turn
  std::shared_ptr<const Mark> mark_ HORA_GUARDED_BY(mu_);  // the last turn's
  int mark_set_ HORA_GUARDED_BY(mu_) = kNobody;            // ... and its set
};

}  // namespace hora
