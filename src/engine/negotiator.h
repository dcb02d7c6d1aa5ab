// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The negotiator (docs/dev/design.md §4): the part of an engine's cycle that agrees
// with the other ranks which of the tensors taken on this rank run now. It
// talks to them only through a ControlPlane (backends/control_plane.h), so
// its unit tests run over a fake one. Each cycle every rank's negotiator,
// in lockstep:
//  1. marks, in a bit vector, the cached tensors it has ready (and cached
//     entries whose parameters changed here, and status bits: "no new
//     uncached tensors here", "not stopping", "coordinator idle", "quiet",
//     "nothing taken here");
//  2. ANDs the vector across ranks (one small allreduce). Cached tensors
//     ready everywhere run with no further message: the fast path. When
//     every rank has the same cached allreduce batch ready, that batch goes
//     with the AND (the carried allreduce: one lockstep step fewer);
//  3. only when some rank has new tensors (or an entry went invalid, or the
//     coordinator has stalls to report) do ranks send the new tensors'
//     parameters to the coordinator (rank 0), which checks them across ranks
//     and broadcasts the decisions: the slow path. Decisions are inserted
//     into every rank's response cache in the same order;
//  4. plans the decisions into batches (fusion.h), which the engine runs.
// It owns the response cache, the coordinator (rank 0), the join state and
// the list of this rank's tensors taken and not yet finished.
//
// Not thread-safe: one cycle at a time, on whichever thread runs it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/control_plane.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/intrusive_list.h"
#include "common/logging.h"
#include "engine/coordinator.h"
#include "engine/messages.h"
#include "engine/response_cache.h"
#include "engine/tunables.h"

namespace hora {

// One tensor of this rank, as the negotiator sees it (the engine's record
// of it derives from this). The engine fills `meta`; the rest is the
// negotiator's.
struct Ticket {
  enum class State : uint8_t { kNew, kSent, kCached };
  // Clears what one tensor left behind (not the cache hint and generation).
  void ResetNegotiation() {
    state = State::kNew;
    counted = false;
  }

  RequestMeta meta;
  // Its buffers (a carried allreduce reads and writes them).
  void* input = nullptr;
  void* output = nullptr;
  TimePoint taken{};  // when the engine took it from its queue
  State state = State::kNew;
  bool counted = false;  // hit or miss recorded
  // Where this name sat in the response cache when last looked up (checked
  // against the cache's entry, or its generation, before use).
  size_t cache_bit = SIZE_MAX;
  // The cache entry (its Generation, at cache_bit) that meta was last found
  // to match, 0 for none; the engine clears it when a tensor asks other
  // than its name's last one did. While the entry stays, a cached step's
  // tensor is a hit with no look at the entry: it is a few cache lines per
  // tensor, cold after the step's data went through.
  uint64_t cache_gen = 0;
  Ticket* prev = nullptr;  // the negotiator's list of taken tickets
  Ticket* next = nullptr;
};

// One decision to carry out, in the order every rank carries them out.
struct Decision {
  const Response* response = nullptr;  // valid until the next cycle
  Ticket* mine = nullptr;  // this rank's tensor when known (the fast path); null: by name
  // This rank has joined (out of data) and has no tensor of it: it reduces
  // identity values instead.
  bool placeholder = false;
  // Some rank had joined when this was decided (the same on every rank):
  // its placeholders take the host's path, so GPU tensors are staged.
  bool joined_any = false;
};

// What a cycle counted, for the engine's stats.
struct NegotiationCounts {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t invalidations = 0;
  uint64_t evictions = 0;
  uint64_t slow_cycles = 0;
  uint64_t coordinator_bytes = 0;  // request and response bytes of the slow path, this rank
};

// A cycle's outcome (Negotiator::Negotiate), valid until the next cycle.
struct CycleOutcome {
  std::vector<Decision> decisions;
  // The decisions to run, fused: indices into `decisions`, batch by batch
  // (join announcements and errors are in none).
  std::vector<std::vector<size_t>> batches;
  // The cycle's one batch already ran, carried with the AND: these tickets,
  // in bit order; no decisions then.
  bool carried = false;
  std::vector<Ticket*> carried_batch;
  TimePoint carried_start{};     // when its step began
  bool stop_everywhere = false;  // some rank stops: the engine's last cycle
  bool quiet_everywhere = true;  // no rank got new submissions since its last cycle
  bool idle_everywhere = false;  // no rank had tensors taken (not even waiting ones)
  // The first rank's new settings (autotuning), taken by every rank this
  // cycle: the fusion threshold already planned this cycle's batches, the
  // cache capacity takes effect next cycle; the rest is the engine's.
  std::optional<Tunables> retuned;
  NegotiationCounts counts;
};

class Negotiator {
 public:
  // The taken ticket of that name, or null (the engine's lookup by name).
  using FindTaken = std::function<Ticket*(const std::string& name)>;

  // `control` must outlive the negotiator. A non-empty `label` ("process set
  // 2 (ranks 0, 2)") starts its stall reports; `job_ranks` (a process
  // set's: the job's rank of each of its ranks) names the ranks in them.
  Negotiator(const Config& config, ControlPlane& control, const Logger& logger, std::string label,
             std::vector<int> job_ranks, FindTaken find_taken);
  ~Negotiator();
  Negotiator(const Negotiator&) = delete;
  Negotiator& operator=(const Negotiator&) = delete;

  // The tensors taken and not yet finished, in the order taken.
  void Take(Ticket* t, TimePoint now);
  void Release(Ticket* t);  // `t` is finished (it must be taken)
  Ticket* first_taken() const { return taken_.front(); }
  bool nothing_taken() const { return taken_.empty(); }

  // One cycle (every rank calls it in lockstep): `stopping`, this rank
  // stops; `quiet_here`, it took no new tensors this cycle; `cycle_start`,
  // when it took them. An error fails the engine.
  Status Negotiate(bool stopping, bool quiet_here, TimePoint cycle_start, CycleOutcome** out);
  // After a cycle whose AND found some rank stopping: "rank 2 shut its
  // Session down", learnt in one more AND with every rank.
  std::string StoppingRanks(bool stopping);

  // On the first rank: every rank takes `t` at the next cycle (that cycle's
  // outcome has it as `retuned`). Elsewhere nothing.
  void OfferSettings(const Tunables& t);

  // Whether some rank has already entered the next cycle and waits for this
  // one; nullopt where the control plane cannot tell.
  std::optional<bool> PeerWaiting() const;

  // "allreduce 'w' and 3 more tensors": what this cycle negotiates, for the
  // control plane's reports.
  std::string Subject() const;

 private:
  // This rank's cached tensors: marks the bit vector (words_). Returns the
  // hit and miss counts.
  void MarkReady(TimePoint cycle_start, NegotiationCounts* counts);
  // The fast path's decisions for the set bits of `ready`, in bit order, each
  // group whole: members of groups not all ready go in `partial` instead.
  // `bits` gets each decision's cache bit.
  void CachedDecisions(const uint64_t* ready, std::vector<Decision>* out, std::vector<size_t>* bits,
                       std::vector<size_t>* partial);
  // If this rank's cached tensors ready this cycle make one allreduce batch
  // that can go with the bit vector, plans it (outcome_) and describes it
  // in `out`.
  bool PlanCarried(CarriedAllreduce* out);
  Status SlowPath(NegotiationCounts* counts);
  // Applies a join announcement in the order decided: marks the rank joined,
  // or ends the join everywhere.
  void ApplyJoin(const Response& r);
  // `decisions` planned into batches (fusion.h): indices, batch by batch;
  // join announcements, errors and decisions this rank has no part in are
  // in none.
  std::vector<std::vector<size_t>> PlanFusion(const std::vector<Decision>& decisions) const;
  // The first rank's offered settings, to every rank (the status word said
  // some came).
  Status TakeSettings(CycleOutcome* o);
  // At a cycle's start, the cache of the capacity the last settings gave.
  void ResizeCache();

  uint64_t fusion_threshold_;  // (autotuning changes it)
  const bool group_fusion_;
  ControlPlane& control_;
  const Logger logger_;
  const std::string label_;
  const int rank_;
  const int size_;
  const std::vector<int> job_ranks_;  // the set's ranks as the job numbers them (empty: the job)
  const FindTaken find_taken_;
  // A cached tensor that waited this long goes to the coordinator (zero:
  // never): only the coordinator can tell which ranks lack it.
  const Duration demote_after_;
  const Duration stall_check_every_;  // how often the coordinator looks for stalls
  IntrusiveList<Ticket, &Ticket::prev, &Ticket::next> taken_;
  ResponseCache cache_;
  std::optional<Coordinator> coordinator_;  // rank 0
  TimePoint last_stall_check_{};
  std::vector<bool> joined_;  // ranks that joined, as announced (same on every rank)
  int joined_count_ = 0;
  // A cycle's lists, kept between cycles with their capacity: lists of a few
  // hundred tensors are tens of KiB each, and allocating and freeing them
  // every cycle made the allocator give the top of its heap back to the
  // system and take it again (brk; docs/dev/performance.md has the numbers).
  CycleOutcome outcome_;
  std::vector<ResponsePtr> held_;        // the cycle's decisions, kept alive until the next
  std::vector<size_t> decided_bits_;     // the fast path's decisions' cache bits
  std::vector<uint64_t> words_;          // the bit vector: ready, valid, status
  std::vector<Ticket*> by_bit_;          // this rank's ticket at each bit it marked ready
  std::vector<size_t> marked_;           // the bits of by_bit_ set this cycle
  std::vector<size_t> partial_;          // CachedDecisions' incomplete groups' bits
  std::vector<uint8_t> offered_;         // the first rank's settings to send (empty: none)
  std::optional<size_t> next_capacity_;  // the cache's, from the next cycle
  std::vector<const RequestMeta*> carried_metas_;  // PlanCarried's tensors, in bit order
  std::vector<AllreducePart> carried_parts_;
  struct SlowScratch {
    std::vector<RequestMeta> mine, peer;
    std::vector<uint32_t> waited, peer_waited;  // how long each already waited, ms
    std::vector<uint8_t> encoded, responses;
    std::vector<Response> decided;  // (rank 0: the coordinator's, then everyone's)
  } slow_;
};

}  // namespace hora
