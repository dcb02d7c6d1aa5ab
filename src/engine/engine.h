// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The engine (docs/dev/design.md §3, §4): one background thread per Session that
// takes submitted tensors, agrees with the other ranks which are ready
// everywhere, fuses them, runs them and completes their handles.
//
// Each cycle, in lockstep with the other ranks, it takes the submitted
// tensors, lets its Negotiator (negotiator.h) decide with the other ranks
// which run now and in which batches (fused allreduces up to
// HORA_FUSION_THRESHOLD_BYTES), runs them on the collective backend and
// completes their handles. Who runs a cycle, and when, is engine_loop.cc's.
//
// Thread-safety: Submit(), Drive() and stats() from any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "backends/control_plane.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "common/output_pool.h"
#include "engine/autotuner.h"
#include "engine/device_batches.h"
#include "engine/drive_gate.h"
#include "engine/engine_stats.h"
#include "engine/handle_state.h"
#include "engine/messages.h"
#include "engine/negotiator.h"
#include "engine/tensor_records.h"
#include "timeline/timeline.h"

namespace hora {

// The cycle time for HORA_CYCLE_TIME_MS=ms: 0 (Horovod's value under XLA,
// no wait between its cycles) is taken as the shortest, 0.1 ms, not a loop
// that would take a core from the training.
inline Duration CycleTimeOf(double ms) { return SecondsToDuration(std::max(ms, 0.1) * 1e-3); }

class Engine final : public Driver {
 public:
  // `control` and `data` must outlive the engine and be used by nothing
  // else (the control plane's Comm is in a tag context of its own). A non-empty
  // `label` ("process set 2 (ranks 0, 2)") starts every error it reports;
  // `job_ranks` (a process set's: the job's rank of each of its ranks)
  // names the ranks of its stall reports. Batches of GPU tensors run on
  // `device` (device_batches.h; null: none come). The outputs the engine
  // allocates (allgather, reducescatter, alltoall) come from `outputs`
  // (output_pool.h; null: fresh memory each). On the first rank, `tuner`
  // (HORA_AUTOTUNE; null: none) scores the finished tensors and picks the
  // settings every rank takes (autotuner.h).
  Engine(const Config& config, ControlPlane& control, CollectiveBackend& data, const Logger& logger,
         std::string label = "", std::vector<int> job_ranks = {},
         std::unique_ptr<DeviceBatches> device = nullptr,
         std::shared_ptr<OutputPool> outputs = nullptr, std::unique_ptr<Autotuner> tuner = nullptr);
  ~Engine();  // stops: one last cycle tells the other ranks
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues `s` (its meta already checked locally) and wakes the engine.
  // Fails the handle at once when a tensor of that name is in flight or the
  // engine has stopped.
  Handle Submit(Submission&& s);
  // Queues every member of a group at once (all or, on error, none).
  std::vector<Handle> SubmitGroup(std::vector<Submission> members);

  EngineStats stats() const;
  // Whether the engine stopped because another rank shut its Session down
  // (not this rank).
  bool StoppedByPeer() const;

  // Driver: runs cycles on the calling thread (see the file comment).
  bool Drive(const DoneFlag& done, TimePoint until) override;

  // Records spans into `timeline` from the next cycle on (null: stop).
  void SetTimeline(std::shared_ptr<Timeline> timeline);
  // Why this engine will stop, for the collectives it fails then ("process
  // set 1 (ranks 0, 1) was removed"); unset: its Session was shut down.
  void SetStopReason(std::string why);

 private:
  // A one-rank engine's lone GPU allreduce or broadcast, which it runs at
  // submission when nothing else is under way (engine_at_submission.cc).
  bool RunsAtSubmission(const RequestMeta& m) const;
  // Runs `s` now, as a cycle would, its handle in `handle`, completed;
  // false (`s` untouched) when something else is under way.
  bool RunNow(Submission& s, Handle* handle) HORA_EXCLUDES(mu_, cycle_mu_);
  // Submit's and SubmitGroup's: queues `members`, all or none, their
  // handles in `handles` (one each).
  Status Queue(std::span<Submission> members, Handle* handles) HORA_EXCLUDES(mu_);
  void Loop();
  // After the loop, once the engine stopped (a rank left, or this one):
  // NCCL's work queued before may wait for a rank that will not make its
  // calls, and no cycle watches it now. It is watched here (WatchNccl)
  // until it ends, the watch aborts it, or the engine is destroyed (which
  // aborts it).
  void WatchAfterStop() HORA_EXCLUDES(mu_, cycle_mu_);
  // Sleeps on cv_ until `when` at the latest; Submit reads sleeps_until_ to
  // tell whether deferred work needs this thread woken.
  void SleepUntil(MutexLock& lock, TimePoint when) HORA_REQUIRES(mu_);
  // Takes the queue and runs one cycle; false once the engine must stop
  // (finished_ is then set).
  bool RunCycle() HORA_REQUIRES(cycle_mu_) HORA_EXCLUDES(mu_);
  // One cycle; returns false once the engine must stop.
  bool Cycle(const std::vector<TensorRecord*>& fresh, bool stopping) HORA_REQUIRES(cycle_mu_)
      HORA_EXCLUDES(mu_);
  // Carries out a cycle's decisions (running its batches) and completes
  // their handles; after a carried allreduce, completes its batch.
  void Execute(const CycleOutcome& outcome) HORA_REQUIRES(cycle_mu_) HORA_EXCLUDES(mu_);
  // Runs one planned batch and finishes its tensors (`joined_any`: some
  // rank had joined when it was decided: Decision::joined_any).
  void RunBatch(const std::vector<TensorRecord*>& batch, bool joined_any) HORA_REQUIRES(cycle_mu_)
      HORA_EXCLUDES(mu_);
  // A batch of GPU tensors (or a joined rank's placeholders for them): on
  // device_, counted.
  Status RunOnDevice(const std::vector<TensorRecord*>& batch, bool joined_any)
      HORA_REQUIRES(cycle_mu_) HORA_EXCLUDES(mu_);
  // The timeline's span of a batch's collective, from `start` to now.
  void SpanBatch(const std::vector<TensorRecord*>& batch, TimePoint start, const Status& st)
      HORA_REQUIRES(cycle_mu_);
  // Completes the handles of `done` (taken tensors) with `st` and releases
  // their records: one lock for the lot.
  void Finish(const std::vector<TensorRecord*>& done, Status st) HORA_REQUIRES(cycle_mu_)
      HORA_EXCLUDES(mu_);
  void Finish(const std::string& name, Status st)  // if taken
      HORA_REQUIRES(cycle_mu_) HORA_EXCLUDES(mu_);
  // The taken tensor named `name`, or null.
  TensorRecord* FindTaken(const std::string& name) HORA_EXCLUDES(mu_);
  TensorRecord* FindTakenLocked(const std::string& name) HORA_REQUIRES(mu_);
  // Gives `p` (not in flight) to submission `s` and queues it; its handle
  // in `handle`.
  void Claim(TensorRecord& p, Submission&& s, Handle* handle) HORA_REQUIRES(mu_);
  // A claimed record's new completion: its kept one renewed, when no one
  // else holds that any more, or a new one.
  Handle MakeHandle(TensorRecord& p) HORA_REQUIRES(mu_);
  // A join announcement (see Coordinator): fails the join, or completes it
  // once every rank joined (the negotiator keeps the join state).
  void ApplyJoin(const Response& r) HORA_REQUIRES(cycle_mu_) HORA_EXCLUDES(mu_);
  void FailAll(const Status& st) HORA_REQUIRES(cycle_mu_) HORA_EXCLUDES(mu_);
  // Every rank's new settings (autotuning), this cycle: the cycle time and
  // the backend's allreduce choice.
  void Retune(const Tunables& t) HORA_REQUIRES(cycle_mu_);
  // The tuner's view of `done`, finished well at `now`: the settings it
  // picks go to the negotiator.
  void Score(const std::vector<TensorRecord*>& done, TimePoint now) HORA_REQUIRES(cycle_mu_);
  Duration CycleTime() const { return Duration(cycle_time_ticks_.load(std::memory_order_relaxed)); }

  const Config config_;
  const ControlPlane& control_;  // (the negotiator's; here for LostPeer, from any thread)
  CollectiveBackend& data_;
  const Logger logger_;
  const std::string label_;
  const int rank_;
  const int job_rank_;  // rank_ as the job numbers it (a process set's engine), for messages
  const int size_;
  // How long a waiter spins on its handle before it sleeps, and the engine
  // on an empty queue right after it moved work (Config::wait_spin_us).
  const Duration spin_;
  const Duration idle_spin_;  // spin_, at most one cycle time
  // HORA_CYCLE_TIME_MS, in Clock ticks: autotuning changes it (under
  // cycle_mu_); the engine's thread reads it.
  std::atomic<int64_t> cycle_time_ticks_;

  mutable Mutex mu_;                              // guards the submission side below
  std::string stop_reason_ HORA_GUARDED_BY(mu_);  // SetStopReason
  bool handoff_ HORA_GUARDED_BY(mu_) = false;     // a driver left work for the engine's thread
  std::condition_variable cv_;
  std::vector<TensorRecord*> queue_ HORA_GUARDED_BY(mu_);  // submitted tensors, not yet taken
  // queue_ is not empty: set with queue_ under mu_, read without mu_ by the
  // engine's poll (a hint; the queue itself is read under mu_).
  std::atomic<bool> queued_{false};
  // Submissions so far (groups count once): how the engine's thread sees a
  // burst still coming in. Written under mu_ (a load and a store, no
  // read-modify-write), read without it.
  std::atomic<uint64_t> submissions_{0};
  // Waiters drive the cycles here (a thread waiting on a handle ran one): a
  // submission then does not wake the engine's thread, whose cycle
  // would often start before the rest of the burst came; the waiter runs it.
  // What no waiter takes up within a cycle time of first_queued_, the
  // engine's thread runs, and submissions wake it again from then on.
  // Written under mu_; read without it as a hint.
  std::atomic<bool> defer_{false};
  TimePoint first_queued_ HORA_GUARDED_BY(mu_);  // when queue_ last stopped being empty
  // When the engine's thread, asleep in Loop, wakes by itself (min: it is
  // not asleep); its looks while idle may be 16 cycle times apart. Once
  // deferred work has gone a cycle time with no waiter (unwaited_: work
  // submitted ahead of its wait, as a backward pass's), a submission that
  // starts the queue while waiters drive wakes the thread if it would sleep
  // past first_queued_ + a cycle time; until then (waiters took every
  // burst at once) it does not, and the first such work may wait up to
  // those 16 cycle times.
  TimePoint sleeps_until_ HORA_GUARDED_BY(mu_) = TimePoint::min();
  bool unwaited_ HORA_GUARDED_BY(mu_) = false;
  // (Submit) that, for the submission just queued
  bool DeferredWakeDueLocked() const HORA_REQUIRES(mu_);
  std::shared_ptr<Timeline> timeline_ HORA_GUARDED_BY(mu_);
  // Every name's record: the tensors in flight on this rank, and idle
  // records kept for reuse, at most max(kKeptRecords, the cache's capacity)
  // of those.
  static constexpr size_t kKeptRecords = 4096;
  TensorRecords records_ HORA_GUARDED_BY(mu_);
  std::vector<TensorRecord*> found_ HORA_GUARDED_BY(mu_);  // (Queue's, kept for its capacity)
  bool stop_requested_ HORA_GUARDED_BY(mu_) = false;
  Status stopped_ HORA_GUARDED_BY(mu_);  // why the engine no longer runs (ok while it does)
  bool stopped_by_peer_ HORA_GUARDED_BY(mu_) = false;
  EngineStats stats_ HORA_GUARDED_BY(mu_);

  // Whoever runs a cycle (the engine's thread or a driver) holds cycle_mu_.
  Mutex cycle_mu_;
  std::atomic<int> drivers_{0};      // threads in Drive (the engine's thread then waits)
  std::shared_ptr<DriveGate> gate_;  // handed to every handle; closed first on destruction
  bool finished_ HORA_GUARDED_BY(cycle_mu_) = false;  // a cycle returned false: no more cycles
  bool driven_ HORA_GUARDED_BY(cycle_mu_) = false;    // the last cycle ran on a driver's thread
  uint64_t finished_tensors_ HORA_GUARDED_BY(cycle_mu_) = 0;  // tensors finished (busy_)
  // When the last cycle (by either thread) ended, or the last collective
  // run at submission (RunNow), in Clock ticks: written under cycle_mu_,
  // read also without it by the engine's thread while a waiter drives.
  std::atomic<int64_t> last_cycle_end_{0};
  // The cycle's submissions, and Execute's batch (kept for their capacity).
  std::vector<TensorRecord*> fresh_ HORA_GUARDED_BY(cycle_mu_);
  std::vector<TensorRecord*> batch_ HORA_GUARDED_BY(cycle_mu_);
  struct Completion {  // Finish: a handle to complete, after the records went back
    Handle handle;
    std::optional<Tensor> output;
    std::vector<int64_t> received;
    std::shared_ptr<DeviceDone> on_device;
  };
  // Finish's lists, kept between cycles with their capacity (see
  // Negotiator::outcome_).
  struct FinishScratch {
    std::vector<Completion> completions;
    std::vector<TensorRecord*> records;
  } finishing_ HORA_GUARDED_BY(cycle_mu_);
  // Placeholders of a joined rank, by name (made and finished in one cycle).
  Placeholders placeholders_ HORA_GUARDED_BY(cycle_mu_);
  bool busy_ HORA_GUARDED_BY(cycle_mu_) = false;  // cycle again at once (see Loop)
  // The last cycle found no rank with tensors (CycleOutcome::idle_everywhere).
  bool idle_everywhere_ HORA_GUARDED_BY(cycle_mu_) = false;
  std::vector<std::byte> fusion_ HORA_GUARDED_BY(cycle_mu_);
  // Where GPU tensors' batches run (null: none come). Its Claimed and
  // Released are called under mu_ or cycle_mu_, Cancel by the destructor,
  // the rest under cycle_mu_.
  const std::unique_ptr<DeviceBatches> device_;
  const std::shared_ptr<OutputPool> outputs_;                             // (null: fresh memory)
  const std::unique_ptr<Autotuner> tuner_ HORA_PT_GUARDED_BY(cycle_mu_);  // (null: none)
  // This cycle's copy of timeline_.
  std::shared_ptr<Timeline> cycle_timeline_ HORA_GUARDED_BY(cycle_mu_);
  Negotiator negotiator_ HORA_GUARDED_BY(cycle_mu_);  // (after the members its lookup uses)
  std::thread thread_;
};

}  // namespace hora
