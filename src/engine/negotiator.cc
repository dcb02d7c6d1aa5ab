// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/negotiator.h"

#include <algorithm>

#include "engine/fusion.h"
#include "engine/set_bits.h"
#include "engine/whole_groups.h"

namespace hora {
namespace {

// Status bits, in the last word of the vector. AND semantics: a bit stays
// set only when it is set on every rank.
constexpr uint64_t kNoNewWork = 1;        // no rank has uncached tensors to send
constexpr uint64_t kNotStopping = 2;      // no rank is stopping
constexpr uint64_t kCoordinatorIdle = 4;  // the coordinator has nothing to report
constexpr uint64_t kQuiet = 8;            // no rank got new submissions since its last cycle
constexpr uint64_t kSameSettings = 16;    // the first rank offers no new settings (autotuning)
constexpr uint64_t kNothingTaken = 32;    // no rank has tensors taken (an idle cycle everywhere)

// The first of the stall warning, the stall shutdown and the timeout to
// come for a waiting tensor (zero: all are off).
Duration FirstStallEvent(const Config& c) {
  Duration first = Duration::zero();
  for (double s : {c.stall_warning_s, c.stall_shutdown_s, c.timeout_s}) {
    const Duration d = SecondsToDuration(s);
    if (d > Duration::zero() && (first == Duration::zero() || d < first)) first = d;
  }
  return first;
}

}  // namespace

Negotiator::Negotiator(const Config& config, ControlPlane& control, const Logger& logger,
                       std::string label, std::vector<int> job_ranks, FindTaken find_taken)
    : fusion_threshold_(config.fusion_threshold_bytes),
      group_fusion_(config.disable_group_fusion != "1"),
      control_(control),
      logger_(logger),
      label_(std::move(label)),
      rank_(control.rank()),
      size_(control.size()),
      job_ranks_(std::move(job_ranks)),
      find_taken_(std::move(find_taken)),
      // A cached tensor goes to the coordinator, which alone knows which
      // ranks lack it, half the first stall event after it came (its
      // request says how long it waited, so the report comes on time); the
      // coordinator looks for stalls four times per event, at most every
      // second.
      demote_after_(FirstStallEvent(config) / 2),
      stall_check_every_(FirstStallEvent(config) == Duration::zero()
                             ? Duration::max()
                             : std::clamp<Duration>(FirstStallEvent(config) / 4,
                                                    std::chrono::milliseconds(10),
                                                    std::chrono::seconds(1))),
      cache_(config.cache_capacity),
      joined_(static_cast<size_t>(size_), false) {
  if (rank_ == 0) {
    coordinator_.emplace(size_, SecondsToDuration(config.stall_warning_s),
                         SecondsToDuration(config.stall_shutdown_s),
                         SecondsToDuration(config.timeout_s));
    coordinator_->NameRanks(job_ranks_);
  }
  // The control plane's waits are this negotiation: a report or a timeout
  // names the tensors it negotiates (read on the cycle's thread).
  control_.SetSubject([this] { return Subject(); });
}

Negotiator::~Negotiator() { control_.SetSubject(nullptr); }

void Negotiator::Take(Ticket* t, TimePoint now) {
  t->taken = now;
  taken_.PushBack(t);
}

void Negotiator::Release(Ticket* t) {
  taken_.Remove(t);
  t->ResetNegotiation();
}

Status Negotiator::Negotiate(bool stopping, bool quiet_here, TimePoint cycle_start,
                             CycleOutcome** out) {
  CycleOutcome& o = outcome_;
  *out = &o;
  o.decisions.clear();
  o.batches.clear();
  o.carried = false;
  o.carried_batch.clear();
  o.stop_everywhere = false;
  o.counts = {};
  o.retuned.reset();
  held_.clear();
  decided_bits_.clear();
  if (next_capacity_) ResizeCache();

  const size_t cap_words = (cache_.capacity() + 63) / 64;
  words_.assign(2 * cap_words + 1, 0);
  uint64_t* ready = words_.data();
  uint64_t* valid = words_.data() + cap_words;
  uint64_t& status = words_.back();
  std::fill(valid, valid + cap_words, ~uint64_t{0});
  status = kNoNewWork | kNotStopping | kCoordinatorIdle | kQuiet | kSameSettings | kNothingTaken;
  if (!taken_.empty()) status &= ~kNothingTaken;
  if (!offered_.empty()) status &= ~kSameSettings;
  if (stopping) status &= ~kNotStopping;
  if (!quiet_here) status &= ~kQuiet;
  // by_bit_ is cleared again whatever happens below.
  struct ClearMarks {
    Negotiator* n;
    ~ClearMarks() {
      for (size_t b : n->marked_) n->by_bit_[b] = nullptr;
      n->marked_.clear();
    }
  } clear_marks{this};
  MarkReady(cycle_start, &o.counts);
  const TimePoint now = cycle_start;  // (a clock read is a few per cent of a cached cycle)
  if (coordinator_ && coordinator_->waiting() > 0 &&
      now - last_stall_check_ >= stall_check_every_) {
    status &= ~kCoordinatorIdle;  // time to look for stalls
    last_stall_check_ = now;
  }

  // A rank with only cached work, all of it valid, sends the allreduce it
  // will run if every rank has the same ready (PlanCarried).
  CarriedAllreduce carried;
  const bool all_valid =
      std::all_of(valid, valid + cap_words, [](uint64_t w) { return w == ~uint64_t{0}; });
  const uint64_t fast_only = kNoNewWork | kNotStopping | kCoordinatorIdle;
  if ((status & fast_only) == fast_only && all_valid && PlanCarried(&carried)) {
    o.carried_start = now;
    HORA_ASSIGN_OR_RETURN(o.carried, control_.AndCarrying(words_, &carried));
  } else {
    HORA_RETURN_IF_ERROR(control_.And(words_));
  }
  if ((status & kSameSettings) == 0) HORA_RETURN_IF_ERROR(TakeSettings(&o));

  for (size_t w = 0; w < cap_words; ++w) valid[w] = ~valid[w];  // now: the invalid bits
  ForEachSetBit(valid, cache_.capacity(), [&](size_t b) {
    if (!cache_.Occupied(b)) return;
    if (Ticket* t = find_taken_(cache_.At(b).name)) t->state = Ticket::State::kNew;
    cache_.Erase(b);
    ++o.counts.invalidations;
  });
  o.quiet_everywhere = (status & kQuiet) != 0;
  o.idle_everywhere = (status & kNothingTaken) != 0;
  if (o.carried) {
    // Every rank carried the same allreduce with the same bits (all valid,
    // no new work, none stopping, the coordinator idle): that batch, already
    // run, is the whole cycle; no decisions. Used in bit order, as below.
    for (const Ticket* t : o.carried_batch) cache_.Touch(t->cache_bit);
    return Status::Ok();
  }
  o.carried_batch.clear();
  // Fast path: cached tensors ready on every rank, in bit order. A group
  // runs only whole: if some of its members are not ready everywhere (an
  // entry was just invalidated), its ready members go to the coordinator
  // with the rest (every rank sees the same bits, so all decide alike).
  CachedDecisions(ready, &o.decisions, &decided_bits_, &partial_);
  for (size_t b : partial_) {
    if (Ticket* t = find_taken_(cache_.At(b).name)) t->state = Ticket::State::kNew;
  }
  for (size_t b : decided_bits_) cache_.Touch(b);
  o.stop_everywhere = (status & kNotStopping) == 0;
  if ((status & kNoNewWork) && (status & kCoordinatorIdle) && o.counts.invalidations == 0 &&
      partial_.empty()) {
    o.batches = PlanFusion(o.decisions);
    return Status::Ok();
  }
  // The slow path inserts into the cache, which may evict what a fast
  // decision points to: keep those alive for the cycle.
  for (size_t b : decided_bits_) held_.push_back(cache_.Shared(b));
  HORA_RETURN_IF_ERROR(SlowPath(&o.counts));
  o.batches = PlanFusion(o.decisions);
  return Status::Ok();
}

void Negotiator::MarkReady(TimePoint cycle_start, NegotiationCounts* counts) {
  const size_t cap_words = (cache_.capacity() + 63) / 64;
  uint64_t* ready = words_.data();
  uint64_t* valid = words_.data() + cap_words;
  uint64_t& status = words_.back();
  if (by_bit_.size() != cache_.capacity()) by_bit_.assign(cache_.capacity(), nullptr);
  for (Ticket* t = taken_.front(); t != nullptr; t = t->next) {
    if (t->state == Ticket::State::kSent) continue;
    size_t bit = t->cache_bit;
    // As the name's last tensor, with the entry it matched still there: a
    // hit (Ticket::cache_gen).
    bool hit =
        t->cache_gen != 0 && bit < cache_.capacity() && cache_.Generation(bit) == t->cache_gen;
    if (!hit) {
      // The ticket's hint spares a hash lookup while the entry stays put.
      const std::string& name = t->meta.name;
      if (bit >= cache_.capacity() || !cache_.Occupied(bit) || cache_.At(bit).name != name) {
        bit = cache_.Find(name).value_or(SIZE_MAX);
        t->cache_bit = bit;
      }
      hit = bit != SIZE_MAX && cache_.ResponseAt(bit).Matches(t->meta, rank_, size_);
      t->cache_gen = hit ? cache_.Generation(bit) : 0;
    }
    if (hit && demote_after_ > Duration::zero() && cycle_start - t->taken >= demote_after_) {
      // Waited long for some rank: to the coordinator, which tells which.
      hit = false;
      t->cache_gen = 0;
    }
    if (hit) {
      ready[bit / 64] |= uint64_t{1} << (bit % 64);
      by_bit_[bit] = t;
      marked_.push_back(bit);
      t->state = Ticket::State::kCached;
      if (!t->counted) ++counts->hits;
    } else {
      if (bit != SIZE_MAX)
        valid[bit / 64] &= ~(uint64_t{1} << (bit % 64));  // changed here: drop it
      t->state = Ticket::State::kNew;
      status &= ~kNoNewWork;
      if (!t->counted) ++counts->misses;
    }
    t->counted = true;
  }
  if (joined_[static_cast<size_t>(rank_)]) {
    // Out of data: ready for every cached allreduce (with identity values);
    // other cached collectives need this rank's data, so they go back to
    // the coordinator, which fails them naming the joined ranks.
    for (size_t b = 0; b < cache_.capacity(); ++b) {
      if (!cache_.Occupied(b)) continue;
      if (cache_.At(b).op == OpType::kAllreduce) {
        ready[b / 64] |= uint64_t{1} << (b % 64);
      } else {
        valid[b / 64] &= ~(uint64_t{1} << (b % 64));
      }
    }
  }
}

void Negotiator::CachedDecisions(const uint64_t* ready, std::vector<Decision>* out,
                                 std::vector<size_t>* bits, std::vector<size_t>* partial) {
  partial->clear();
  // (Nothing is erased from the cache meanwhile: the group names stay.)
  WholeGroups groups;
  ForEachSetBit(ready, cache_.capacity(), [&](size_t b) {
    if (cache_.Occupied(b)) groups.Count(cache_.At(b));
  });
  const bool joined_here = joined_[static_cast<size_t>(rank_)];
  ForEachSetBit(ready, cache_.capacity(), [&](size_t b) {
    if (!cache_.Occupied(b)) return;
    const RequestMeta& m = cache_.At(b);
    if (!groups.Whole(m)) {
      partial->push_back(b);
      return;
    }
    // This rank's ticket at a ready bit (null: none, e.g. a joined rank's
    // placeholder).
    Ticket* mine = by_bit_[b];
    if (mine != nullptr && mine->state != Ticket::State::kCached) mine = nullptr;
    out->push_back({&cache_.ResponseAt(b), mine,
                    mine == nullptr && joined_here && m.op == OpType::kAllreduce,
                    joined_count_ > 0});
    bits->push_back(b);
  });
}

std::vector<std::vector<size_t>> Negotiator::PlanFusion(
    const std::vector<Decision>& decisions) const {
  std::vector<const RequestMeta*> metas;
  std::vector<size_t> index;
  metas.reserve(decisions.size());
  index.reserve(decisions.size());
  for (size_t i = 0; i < decisions.size(); ++i) {
    const Response& r = *decisions[i].response;
    if (r.params.op == OpType::kJoin || !r.error.empty()) continue;
    metas.push_back(&r.params);
    index.push_back(i);
  }
  // (Steady training: everything in one batch, in order, which is what
  // PlanBatches would make of it; asked in one pass without allocating.)
  uint64_t bytes = 0;
  if (!metas.empty() && FusesIntoOneBatch(metas, fusion_threshold_, group_fusion_, &bytes)) {
    std::vector<std::vector<size_t>> one;
    one.push_back(std::move(index));
    return one;
  }
  std::vector<std::vector<size_t>> plan = PlanBatches(metas, fusion_threshold_, group_fusion_);
  for (auto& batch : plan) {
    for (size_t& i : batch) i = index[i];
  }
  return plan;
}

void Negotiator::OfferSettings(const Tunables& t) {
  if (rank_ == 0) offered_ = t.Encode();
}

Status Negotiator::TakeSettings(CycleOutcome* o) {
  // Every rank saw the bit cleared: the first rank's settings, to all.
  std::vector<uint8_t> bytes = std::move(offered_);
  offered_.clear();
  HORA_RETURN_IF_ERROR(control_.Broadcast(0, bytes));
  std::optional<Tunables> t = Tunables::Decode(bytes);
  if (!t) return InternalError("autotuning: the first rank's settings came malformed");
  fusion_threshold_ = t->fusion_threshold_bytes;
  next_capacity_ = t->cache_capacity;  // (the cache is in use until the cycle ends)
  o->retuned = std::move(t);
  return Status::Ok();
}

void Negotiator::ResizeCache() {
  const size_t capacity = *next_capacity_;
  next_capacity_.reset();
  if (capacity == cache_.capacity()) return;
  // Every rank empties its cache at this cycle (ResponseCache::Reset: no
  // ticket's cache_gen matches again).
  cache_.Reset(capacity);
  for (Ticket* t = taken_.front(); t != nullptr; t = t->next) {
    t->cache_bit = SIZE_MAX;
    t->cache_gen = 0;
    if (t->state == Ticket::State::kCached) t->state = Ticket::State::kNew;
  }
  by_bit_.assign(capacity, nullptr);
}

std::string Negotiator::StoppingRanks(bool stopping) {
  // Every rank saw the same AND (someone stops), so every rank makes this
  // one more: a bit per rank, cleared by the ranks that stop.
  std::vector<uint64_t> bits((static_cast<size_t>(size_) + 63) / 64, ~uint64_t{0});
  if (stopping) bits[static_cast<size_t>(rank_) / 64] &= ~(uint64_t{1} << (rank_ % 64));
  if (!control_.And(bits).ok()) return "a rank shut its Session down";
  std::vector<int> who;
  for (int r = 0; r < size_; ++r) {
    if ((bits[static_cast<size_t>(r) / 64] >> (r % 64) & 1) == 0) {
      who.push_back(job_ranks_.empty() ? r : job_ranks_[static_cast<size_t>(r)]);
    }
  }
  std::string list;
  for (size_t i = 0; i < who.size(); ++i) list += (i ? ", " : "") + std::to_string(who[i]);
  return (who.size() == 1 ? "rank " + list + " shut its" : "ranks " + list + " shut their") +
         " Session down";
}

std::optional<bool> Negotiator::PeerWaiting() const {
  // (Negotiate's vector: of the capacity the next cycle has.)
  const size_t capacity = next_capacity_.value_or(cache_.capacity());
  return control_.PeerWaiting(2 * ((capacity + 63) / 64) + 1);
}

std::string Negotiator::Subject() const {
  const std::string label = label_.empty() ? "" : label_ + ": ";
  const Ticket* first = taken_.front();
  if (first == nullptr) return label + "the negotiation of an idle engine";
  const size_t more = taken_.size() - 1;
  return label + UserName(first->meta) +
         (more == 0 ? "" : " and " + std::to_string(more) + " more tensor" + (more > 1 ? "s" : ""));
}

}  // namespace hora
