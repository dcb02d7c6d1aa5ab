// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The engine (design.md §3, §4): one background thread per Session that
// takes submitted tensors, agrees with the other ranks which are ready
// everywhere, fuses them, runs them and completes their handles.
//
// Each cycle every rank's engine, in lockstep:
//  1. marks, in a bit vector, the cached tensors it has ready (and cached
//     entries whose parameters changed here, and status bits: "no new
//     uncached tensors here", "not stopping", "coordinator idle");
//  2. ANDs the vector across ranks (one small allreduce). Cached tensors
//     ready everywhere run with no further message: the fast path;
//  3. only when some rank has new tensors (or an entry went invalid, or the
//     coordinator has stalls to report) do ranks send the new tensors'
//     parameters to the coordinator (rank 0), which checks them across ranks
//     and broadcasts the decisions: the slow path. Decisions are inserted
//     into every rank's response cache in the same order;
//  4. fuses allreduces of one kind into one buffer up to
//     HORA_FUSION_THRESHOLD_BYTES and runs everything decided.
// An engine wakes as soon as a tensor is submitted (while more follow within
// a few microseconds, it lets the burst end first, so that one cycle takes
// it); while idle it still looks every HORA_CYCLE_TIME_MS, so that no rank
// waits on an idle one for long, and joins a cycle -- on one host, only when
// some rank has waited for it that long (idle engines there do not cycle at
// all). Looks that find nothing to do come further apart, up to 16 cycle
// times; a rank that has tensors of its own looks every cycle time.
//
// A thread waiting on one of the engine's handles runs cycles itself while
// it spins (Drive): on a host whose ranks outnumber the spare cores, the
// hand-off to the engine's thread and back would be two thread switches per
// collective. A cycle runs on one thread at a time (cycle_mu_), the engine's
// or a waiter's; the engine's thread keeps cycling whenever no waiter does.
// Once waiters drive, submissions no longer wake the engine's thread: a
// cycle it started would often miss the rest of a burst (the waiter's cycle
// takes all of it); what no waiter takes up within a cycle time, it runs
// (the first time, once its next look comes: see sleeps_until_).
//
// Thread-safety: Submit(), Drive() and stats() from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "collectives/comm.h"
#include "common/config.h"
#include "common/intrusive_list.h"
#include "common/logging.h"
#include "engine/control.h"
#include "engine/coordinator.h"
#include "engine/drive_gate.h"
#include "engine/handle_state.h"
#include "engine/messages.h"
#include "engine/response_cache.h"
#include "timeline/timeline.h"

namespace hora {

struct EngineStats {
  uint64_t cycles = 0;
  uint64_t slow_cycles = 0;        // cycles that went through the coordinator
  uint64_t coordinator_bytes = 0;  // request and response bytes of the slow path, this rank
  uint64_t cache_hits = 0;         // tensors that ran from the cache
  uint64_t cache_misses = 0;       // tensors negotiated with the coordinator
  uint64_t cache_evictions = 0;
  uint64_t cache_invalidations = 0;
  uint64_t tensors = 0;          // tensors completed (ok or error)
  uint64_t fused_batches = 0;    // allreduce batches of more than one tensor
  uint64_t driven_cycles = 0;    // cycles run by a waiter (Drive), not the engine's thread
  uint64_t carried_batches = 0;  // cached allreduces sent with the bit vector (one step fewer)
  uint64_t name_records = 0;     // records by name: in flight, and idle ones kept (see Pending)
  uint64_t idle_looks = 0;       // an idle engine's thread woke to look (Loop)
};

// One tensor submitted on this rank.
struct Submission {
  TimePoint submitted{};  // set by the engine as it queues it, only while a timeline records
  RequestMeta meta;       // (its shape: see shape_of)
  // When set, the tensor's shape, and meta.shape is left empty: the
  // caller's vector, valid until Engine::Submit (or SubmitGroup) returns,
  // which copies it, if it queues the tensor, into the vector of the name's
  // record. That vector stays with the record
  // from one tensor of the name to the next, so a steady step allocates no
  // shapes.
  const std::vector<int64_t>* shape_of = nullptr;
  // The caller's buffers (meta and shape_of describe them): plain pointers.
  void* input = nullptr;
  void* output = nullptr;
  std::shared_ptr<Handle::State> handle;
};

class Engine final : public Driver {
 public:
  // `control` and `data` must outlive the engine and be used by nothing
  // else; `control` is a Comm in a tag context of its own. A non-empty
  // `label` ("process set 2 (ranks 0, 2)") starts every error it reports;
  // `job_ranks` (a process set's: the job's rank of each of its ranks)
  // names the ranks of its stall reports.
  Engine(const Config& config, Comm& control, CollectiveBackend& data, const Logger& logger,
         std::string label = "", std::vector<int> job_ranks = {});
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

  // Driver: runs cycles on the calling thread (see the file comment).
  bool Drive(const DoneFlag& done, TimePoint until) override;

  // Records spans into `timeline` from the next cycle on (null: stop).
  void SetTimeline(std::shared_ptr<Timeline> timeline);

 private:
  enum class State { kNew, kSent, kCached };
  // One name's record, by name in names_ (under mu_). Once its tensor is
  // finished the record stays, idle, for the next tensor of that name (a
  // training step submits the same names every step), so that a steady
  // step allocates no record and hashes each name once, in Submit. Records
  // of names that never come back (not cacheable: generated names) go at
  // once, and of the idle ones the least recently used go beyond
  // kKeptRecords. Whoever holds a tensor in flight (the queue, then the
  // cycle) uses its record without mu_: nothing else touches it until
  // Finish releases it.
  struct Pending {
    // Clears what one tensor left behind (not the cache hint and
    // generation, not links).
    void Reset();

    Submission sub;
    bool in_flight = false;        // under mu_: submitted and not yet finished
    bool listed = false;           // taken by a cycle: on taken_
    bool idle = false;             // under mu_: on idle_
    Pending* idle_prev = nullptr;  // idle_'s links
    Pending* idle_next = nullptr;
    State state = State::kNew;
    bool counted = false;     // hit or miss recorded
    TimePoint taken{};        // when the engine took it from the queue
    Pending* prev = nullptr;  // taken_'s links
    Pending* next = nullptr;
    // Where this name sat in the response cache when last looked up
    // (checked against the cache's entry, or its generation, before use).
    size_t cache_bit = SIZE_MAX;
    // The cache entry (its Generation, at cache_bit) that sub.meta was last
    // found to match, 0 for none; Claim clears it when a tensor asks other
    // than its name's last one did. While the entry stays, a cached step's
    // tensor is a hit with no look at the entry: it is a few cache lines
    // per tensor, cold after the step's data went through.
    uint64_t cache_gen = 0;
    std::vector<int64_t> rows;  // from the decision (allgather, alltoall)
    std::optional<Tensor> output;
    std::vector<int64_t> received_splits;
    // A joined rank's stand-in for a tensor it never submitted: identity
    // values in `scratch`, no handle (owned by phantoms_, not names_).
    bool phantom = false;
    std::optional<Tensor> scratch;
  };
  // A decision to carry out, with this rank's tensor when the fast path
  // already knows it (null: found by name).
  struct Decision {
    ResponsePtr response;
    Pending* pending = nullptr;
  };

  void Loop();
  void AwaitBurstEnd();  // Loop: wait out a burst of submissions (engine_loop.cc)
  // An idle engine's look (Loop: one to 16 cycle times after the last): whether to join
  // a cycle. Where the control Comm has a shared window (one host), only
  // once some rank has waited for this one since the last look (`seen`:
  // the state between looks); elsewhere, always. cycle_mu_ held.
  bool IdleJoinDue(int64_t* seen) const;
  // Takes the queue and runs one cycle; false once the engine must stop
  // (finished_ is then set). cycle_mu_ held.
  bool RunCycle();
  // One cycle; returns false once the engine must stop.
  bool Cycle(const std::vector<Pending*>& fresh, bool stopping);
  Status Negotiate(std::vector<Decision>* out, bool stopping, bool* stop_everywhere);
  Status SlowPath(std::vector<Decision>* out);
  void CountNegotiated(uint64_t hits, uint64_t misses, uint64_t invalidated);  // stats_
  // Negotiate: if this rank's cached tensors ready this cycle (bits `ready`,
  // in bit order) make one allreduce batch that can go with the bit vector
  // of `words` words, plans it in carried_ and describes it in `out`.
  bool PlanCarried(const uint64_t* ready, size_t words, CarriedAllreduce* out);
  // Runs `decisions` (fusing what it can) and completes their handles; after
  // a carried allreduce (carried_.ran; no decisions then), completes its
  // batch.
  void Execute(const std::vector<Decision>& decisions);
  // Runs one planned batch and finishes its tensors.
  void RunBatch(const std::vector<Pending*>& batch);
  // The timeline's span of a batch's collective, from `start` to now.
  void SpanBatch(const std::vector<Pending*>& batch, TimePoint start, const Status& st);
  Status RunAllreduceBatch(const std::vector<Pending*>& batch);
  // Allgather, reducescatter, alltoall: allocates the output.
  Status RunShaped(Pending& p);
  // Completes the handles of `done` (taken tensors) with `st` and releases
  // their records: one lock for the lot.
  void Finish(const std::vector<Pending*>& done, Status st);
  void Finish(const std::string& name, Status st);  // if taken
  // The taken tensor named `name`, or null. FindTakenLocked: mu_ held.
  Pending* FindTaken(const std::string& name);
  Pending* FindTakenLocked(const std::string& name);
  // Gives `p` (mu_ held; not in flight) to submission `s` and queues it.
  void Claim(Pending& p, Submission&& s);
  // Applies a join announcement (see Coordinator): marks the rank joined,
  // or ends the join everywhere.
  void ApplyJoin(const Response& r);
  // This rank has joined: a stand-in for allreduce `r` (identity values).
  Pending* AddPhantom(const Response& r);
  void FailAll(const Status& st);
  // Once a cycle found that some rank stops: "rank 2 shut its Session
  // down", learnt in one more AND with every rank (this one stopping or not).
  std::string StoppingRanks(bool stopping);
  // "allreduce 'w' and 3 more tensors": what this cycle negotiates, for the
  // control Comm's reports (cycle_mu_ held).
  std::string NegotiatedTensors() const;

  const Config config_;
  Comm& control_;
  CollectiveBackend& data_;
  const Logger logger_;
  const std::string label_;
  const int rank_;
  const int size_;
  // How long a waiter spins on its handle before it sleeps, and the engine
  // on an empty queue right after it moved work (Config::wait_spin_us).
  const Duration spin_;
  const Duration idle_spin_;  // spin_, at most one cycle time
  // A cached tensor that waited this long goes to the coordinator (zero:
  // never): only the coordinator can tell which ranks lack it.
  const Duration demote_after_;
  const Duration stall_check_every_;  // how often the coordinator looks for stalls

  mutable std::mutex mu_;  // guards the submission side below
  bool handoff_ = false;   // a driver left work for the engine's thread
  std::condition_variable cv_;
  std::vector<Pending*> queue_;  // records of submitted tensors, not yet taken
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
  TimePoint first_queued_;  // when queue_ last stopped being empty; guarded by mu_
  // When the engine's thread, asleep in Loop, wakes by itself (min: it is
  // not asleep); its looks while idle may be 16 cycle times apart. Once
  // deferred work has gone a cycle time with no waiter (unwaited_: work
  // submitted ahead of its wait, as a backward pass's), a submission that
  // starts the queue while waiters drive wakes the thread if it would sleep
  // past first_queued_ + a cycle time; until then (waiters took every
  // burst at once) it does not, and the first such work may wait up to
  // those 16 cycle times. Guarded by mu_.
  TimePoint sleeps_until_ = TimePoint::min();
  bool unwaited_ = false;
  bool DeferredWakeDueLocked() const;   // (Submit) that, for the submission just queued
  std::shared_ptr<Timeline> timeline_;  // guarded by mu_
  // Records by name (see Pending): the tensors in flight on this rank and
  // idle records kept for reuse, at most max(kKeptRecords, the cache's
  // capacity) of those.
  std::unordered_map<std::string, Pending> names_;
  static constexpr size_t kKeptRecords = 4096;
  // The idle records, least recently used first: a record leaves when a
  // tensor claims it and joins at the back when its tensor is finished.
  IntrusiveList<Pending, &Pending::idle_prev, &Pending::idle_next> idle_;
  bool stop_requested_ = false;
  Status stopped_;  // why the engine no longer runs (ok while it does)
  EngineStats stats_;

  // Whoever runs a cycle (the engine's thread or a driver) holds cycle_mu_;
  // everything below is guarded by it.
  std::mutex cycle_mu_;
  std::atomic<int> drivers_{0};      // threads in Drive (the engine's thread then waits)
  std::shared_ptr<DriveGate> gate_;  // handed to every handle; closed first on destruction
  bool finished_ = false;            // a cycle returned false: no more cycles
  bool driven_ = false;              // the last cycle ran on a driver's thread
  // When the last cycle (by either thread) ended, in Clock ticks: written
  // under cycle_mu_, read also without it by the engine's thread while a
  // waiter drives.
  std::atomic<int64_t> last_cycle_end_{0};
  std::vector<Pending*> fresh_;  // the cycle's submissions (kept for its capacity)
  // A cycle's lists, kept between cycles with their capacity: lists of a
  // few hundred tensors are tens of KiB each, and allocating and freeing
  // them every cycle made the allocator give the top of its heap back to
  // the system and take it again (brk, with page faults and TLB
  // shootdowns): at np 8 that cost a negotiated step up to 1.7 times its
  // time.
  std::vector<Decision> decided_;  // Cycle: what Negotiate decided
  struct Completion {              // Finish: a handle to complete, after the records went back
    std::shared_ptr<Handle::State> handle;
    std::optional<Tensor> output;
    std::vector<int64_t> received;
  };
  struct FinishScratch {
    std::vector<Completion> completions;
    std::vector<Pending*> records;
  } finishing_;
  struct SlowScratch {  // SlowPath
    std::vector<RequestMeta> mine, peer;
    std::vector<uint32_t> waited, peer_waited;  // how long each already waited, ms
    std::vector<uint8_t> encoded, responses;
    std::vector<Response> decided;  // (rank 0: the coordinator's, then everyone's)
  } slow_;
  // Taken tensors, in submission order (finishing one of a thousand small
  // tensors must not scan or shift the others).
  IntrusiveList<Pending, &Pending::prev, &Pending::next> taken_;
  // Stand-ins of a joined rank, by name (made and finished in one cycle).
  std::unordered_map<std::string, Pending> phantoms_;
  // Negotiate: this rank's tensor at each cache bit it marked ready.
  std::vector<Pending*> by_bit_;
  std::vector<size_t> marked_;   // the bits of by_bit_ set this cycle
  std::vector<uint64_t> words_;  // Negotiate: the bit vector (ready, valid, status)
  // The cycle's cached allreduce batch that went with the bit vector, when
  // every rank had the same tensors ready (PlanCarried, Negotiate): Execute
  // finds it run.
  struct Carried {
    std::vector<Pending*> batch;
    std::vector<AllreducePart> parts;
    bool ran = false;
    TimePoint start{};  // when its step began (the timeline's span)
  } carried_;
  ResponseCache cache_;
  std::optional<Coordinator> coordinator_;  // rank 0
  TimePoint last_stall_check_{};
  TimePoint cycle_start_{};       // when the running cycle took its submissions
  bool quiet_here_ = true;        // no new submissions in this cycle
  bool quiet_everywhere_ = true;  // ... on any rank (last cycle's AND)
  bool busy_ = false;             // cycle again at once (see Loop)
  std::vector<std::byte> fusion_;
  std::vector<bool> joined_;  // ranks that joined, as announced (same on every rank)
  int joined_count_ = 0;
  std::shared_ptr<Timeline> cycle_timeline_;  // this cycle's copy of timeline_
  std::thread thread_;
};

}  // namespace hora
