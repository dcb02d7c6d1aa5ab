// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/engine.h"

#include <algorithm>
#include <bit>
#include <string_view>

#include "common/clock.h"
#include "common/thread_name.h"
#include "engine/control.h"
#include "engine/fusion.h"

namespace hora {
namespace {

// Status bits, in the last word of the vector. AND semantics: a bit stays
// set only when it is set on every rank.
constexpr uint64_t kNoNewWork = 1;        // no rank has uncached tensors to send
constexpr uint64_t kNotStopping = 2;      // no rank is stopping
constexpr uint64_t kCoordinatorIdle = 4;  // the coordinator has nothing to report
constexpr uint64_t kQuiet = 8;            // no rank got new submissions since its last cycle

// Why `m`'s name (or group name) cannot go to the other ranks, or OK: a
// request with a longer one would not decode there.
Status CheckNames(int rank, const RequestMeta& m) {
  for (const std::string* name : {&m.name, &m.group}) {
    if (name->size() <= kMaxNameBytes) continue;
    return InvalidArgument("rank " + std::to_string(rank) + ": " + OpTypeName(m.op) + " '" +
                           name->substr(0, 32) + "...': its " +
                           (name == &m.name ? "name" : "group name") + " is " +
                           std::to_string(name->size()) + " bytes long; names are at most " +
                           std::to_string(kMaxNameBytes) + " bytes");
  }
  return Status::Ok();
}

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

Engine::Engine(const Config& config, Comm& control, CollectiveBackend& data, const Logger& logger,
               std::string label, std::vector<int> job_ranks)
    : config_(config),
      control_(control),
      data_(data),
      logger_(logger),
      label_(std::move(label)),
      rank_(control.rank()),
      size_(control.size()),
      spin_(SecondsToDuration(config.wait_spin_us * 1e-6)),
      // The engine's own poll never outlasts a cycle: it must not keep the
      // others waiting for its negotiation longer than an idle wait would.
      idle_spin_(std::min(spin_, SecondsToDuration(config.cycle_time_ms * 1e-3))),
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
      last_cycle_end_(Clock::now().time_since_epoch().count()),
      cache_(config.cache_capacity),
      joined_(static_cast<size_t>(size_), false) {
  if (rank_ == 0) {
    coordinator_.emplace(size_, SecondsToDuration(config.stall_warning_s),
                         SecondsToDuration(config.stall_shutdown_s),
                         SecondsToDuration(config.timeout_s));
    coordinator_->NameRanks(std::move(job_ranks));
  }
  // The control Comm's waits are this engine's negotiation: a report or a
  // timeout names the tensors it negotiates (read on the cycle's thread).
  control_.SetSubject([this] { return NegotiatedTensors(); });
  gate_ = std::make_shared<DriveGate>(this);
  thread_ = std::thread([this] {
    NameThisThread("hora-engine");
    Loop();
  });
}

Engine::~Engine() {
  gate_->Close();  // no waiter drives from here on
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_requested_ = true;
  }
  cv_.notify_all();
  thread_.join();
  control_.SetSubject(nullptr);  // (the Comm outlives this engine)
}

Handle Engine::Submit(Submission&& s) {
  s.handle = std::make_shared<Handle::State>(s.meta.name, spin_);
  s.handle->gate = gate_;
  Handle h(s.handle);
  if (Status names = CheckNames(rank_, s.meta); !names.ok()) {
    s.handle->Complete(names);
    return h;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopped_.ok()) {
      s.handle->Complete(stopped_);
      return h;
    }
    Pending& p = names_[s.meta.name];  // (a new record or an idle one, or in flight)
    const bool starts_queue = queue_.empty();
    if (p.in_flight) {
      s.handle->Complete(InvalidArgument(
          "rank " + std::to_string(rank_) + ": " + OpTypeName(s.meta.op) + " '" + s.meta.name +
          "': a tensor of that name is already in flight on this rank (names must be unique "
          "among unfinished collectives)"));
      return h;
    }
    Claim(p, std::move(s));
    queued_.store(true, std::memory_order_release);
    submissions_.store(submissions_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    // While waiters drive, a waiter (or the engine's thread, a cycle time
    // on) will run it.
    if (defer_.load(std::memory_order_relaxed) && !(starts_queue && DeferredWakeDueLocked()))
      return h;
  }
  cv_.notify_one();
  return h;
}

bool Engine::DeferredWakeDueLocked() const {
  return unwaited_ &&
         sleeps_until_ > first_queued_ + SecondsToDuration(config_.cycle_time_ms * 1e-3);
}

std::vector<Handle> Engine::SubmitGroup(std::vector<Submission> members) {
  std::vector<Handle> handles;
  handles.reserve(members.size());
  for (Submission& s : members) {
    s.handle = std::make_shared<Handle::State>(s.meta.name, spin_);
    s.handle->gate = gate_;
    handles.emplace_back(s.handle);
  }
  Status refused;
  for (const Submission& s : members) {
    if (refused.ok()) refused = CheckNames(rank_, s.meta);
  }
  bool wake = false;
  if (refused.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopped_.ok()) {
      refused = stopped_;
    } else {
      // All names or none: check every name first, then claim them (the
      // members' names, "<group>.<i>", differ from each other).
      for (const Submission& s : members) {
        auto it = names_.find(s.meta.name);
        if (it != names_.end() && it->second.in_flight) {
          refused = InvalidArgument("rank " + std::to_string(rank_) + ": group '" + s.meta.group +
                                    "': a tensor named '" + s.meta.name +
                                    "' is already in flight on this rank");
          break;
        }
      }
      if (refused.ok()) {
        const bool starts_queue = queue_.empty();
        for (Submission& s : members) {
          Pending& p = names_[s.meta.name];  // (before s is moved from)
          Claim(p, std::move(s));
        }
        queued_.store(true, std::memory_order_release);
        submissions_.store(submissions_.load(std::memory_order_relaxed) + 1,
                           std::memory_order_release);
        wake = !defer_.load(std::memory_order_relaxed) ||
               (starts_queue && DeferredWakeDueLocked());  // (as Submit)
      }
    }
  }
  if (!refused.ok()) {
    for (Submission& s : members) s.handle->Complete(refused);
    return handles;
  }
  if (wake) cv_.notify_one();
  return handles;
}

void Engine::SetTimeline(std::shared_ptr<Timeline> timeline) {
  std::lock_guard<std::mutex> lock(mu_);
  timeline_ = std::move(timeline);
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineStats s = stats_;
  s.name_records = names_.size();
  return s;
}

bool Engine::Cycle(const std::vector<Pending*>& fresh, bool stopping) {
  quiet_here_ = fresh.empty();
  const uint64_t done_before = stats_.tensors;
  const TimePoint taken = Clock::now();
  cycle_start_ = taken;
  for (Pending* p : fresh) {
    // (Not stamped when the timeline started after its submission.)
    if (cycle_timeline_ && p->sub.submitted != TimePoint{}) {
      cycle_timeline_->Span(p->sub.meta.name, "queued", p->sub.submitted, taken);
    }
    p->taken = taken;
    p->listed = true;
    taken_.PushBack(p);
  }
  // The cycle's decisions, in a list kept between cycles (see slow_).
  std::vector<Decision>& decided = decided_;
  struct Release {
    std::vector<Decision>& d;
    ~Release() { d.clear(); }  // the responses, at once
  } release{decided};
  decided.clear();
  bool stop_everywhere = false;
  Status st = Negotiate(&decided, stopping, &stop_everywhere);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.cycles;
  }
  if (!st.ok()) {
    logger_.Error("engine: " + st.ToString());
    FailAll(st);
    return false;
  }
  Execute(decided);
  busy_ = !quiet_everywhere_ || stats_.tensors != done_before;
  if (stop_everywhere) {
    FailAll(AbortedError("rank " + std::to_string(rank_) + ": the engine stopped: " +
                         StoppingRanks(stopping) + " (shutdown(), or the end of its process)"));
    return false;
  }
  return true;
}

std::string Engine::StoppingRanks(bool stopping) {
  // Every rank saw the same AND (someone stops), so every rank makes this
  // one more: a bit per rank, cleared by the ranks that stop.
  std::vector<uint64_t> bits((static_cast<size_t>(size_) + 63) / 64, ~uint64_t{0});
  if (stopping) bits[static_cast<size_t>(rank_) / 64] &= ~(uint64_t{1} << (rank_ % 64));
  if (!AllreduceAnd(control_, bits).ok()) return "a rank shut its Session down";
  std::vector<int> who;
  for (int r = 0; r < size_; ++r) {
    if ((bits[static_cast<size_t>(r) / 64] >> (r % 64) & 1) == 0) who.push_back(r);
  }
  std::string list;
  for (size_t i = 0; i < who.size(); ++i) list += (i ? ", " : "") + std::to_string(who[i]);
  return (who.size() == 1 ? "rank " + list + " shut its" : "ranks " + list + " shut their") +
         " Session down";
}

Status Engine::Negotiate(std::vector<Decision>* out, bool stopping, bool* stop_everywhere) {
  carried_.ran = false;
  const size_t cap_words = (cache_.capacity() + 63) / 64;
  std::vector<uint64_t>& words = words_;  // (kept between cycles, as decided_)
  words.assign(2 * cap_words + 1, 0);
  uint64_t* ready = words.data();
  uint64_t* valid = words.data() + cap_words;
  uint64_t& status = words.back();
  std::fill(valid, valid + cap_words, ~uint64_t{0});
  status = kNoNewWork | kNotStopping | kCoordinatorIdle | kQuiet;
  if (stopping) status &= ~kNotStopping;
  if (!quiet_here_) status &= ~kQuiet;

  uint64_t hits = 0, misses = 0;
  if (by_bit_.size() != cache_.capacity()) by_bit_.assign(cache_.capacity(), nullptr);
  for (Pending* p = taken_.front(); p != nullptr; p = p->next) {
    if (p->state == State::kSent) continue;
    size_t bit = p->cache_bit;
    // As the name's last tensor, with the entry it matched still there: a
    // hit (Pending::cache_gen).
    bool hit =
        p->cache_gen != 0 && bit < cache_.capacity() && cache_.Generation(bit) == p->cache_gen;
    if (!hit) {
      // The record's hint spares a hash lookup while the entry stays put.
      const std::string& name = p->sub.meta.name;
      if (bit >= cache_.capacity() || !cache_.Occupied(bit) || cache_.At(bit).name != name) {
        bit = cache_.Find(name).value_or(SIZE_MAX);
        p->cache_bit = bit;
      }
      hit = bit != SIZE_MAX && cache_.ResponseAt(bit).Matches(p->sub.meta, rank_, size_);
      p->cache_gen = hit ? cache_.Generation(bit) : 0;
    }
    if (hit && demote_after_ > Duration::zero() && cycle_start_ - p->taken >= demote_after_) {
      // Waited long for some rank: to the coordinator, which tells which.
      hit = false;
      p->cache_gen = 0;
    }
    if (hit) {
      ready[bit / 64] |= uint64_t{1} << (bit % 64);
      by_bit_[bit] = p;
      marked_.push_back(bit);
      p->state = State::kCached;
      if (!p->counted) ++hits;
    } else {
      if (bit != SIZE_MAX)
        valid[bit / 64] &= ~(uint64_t{1} << (bit % 64));  // changed here: drop it
      p->state = State::kNew;
      status &= ~kNoNewWork;
      if (!p->counted) ++misses;
    }
    p->counted = true;
  }
  if (joined_[static_cast<size_t>(rank_)]) {
    // Out of data: ready for every cached allreduce (with identity values);
    // other cached collectives need this rank's data, so they go back to
    // the coordinator, which fails them naming the joined ranks.
    for (size_t b = 0; b < cache_.capacity(); ++b) {
      if (!cache_.Occupied(b)) continue;
      uint64_t& word = cache_.At(b).op == OpType::kAllreduce ? ready[b / 64] : valid[b / 64];
      if (cache_.At(b).op == OpType::kAllreduce) {
        word |= uint64_t{1} << (b % 64);
      } else {
        word &= ~(uint64_t{1} << (b % 64));
      }
    }
  }
  const TimePoint now = Clock::now();
  if (coordinator_ && coordinator_->waiting() > 0 &&
      now - last_stall_check_ >= stall_check_every_) {
    status &= ~kCoordinatorIdle;  // time to look for stalls
    last_stall_check_ = now;
  }

  // This rank's tensor at a ready bit (null: none, e.g. a joined rank's
  // stand-in); by_bit_ is cleared again whatever happens below.
  auto mine_at = [&](size_t b) -> Pending* {
    Pending* p = by_bit_[b];
    return p != nullptr && p->state == State::kCached ? p : nullptr;
  };
  struct ClearMarks {
    Engine* e;
    ~ClearMarks() {
      for (size_t b : e->marked_) e->by_bit_[b] = nullptr;
      e->marked_.clear();
    }
  } clear_marks{this};
  // A rank with only cached work, all of it valid, sends the allreduce it
  // will run if every rank has the same ready (engine_carried.cc).
  CarriedAllreduce carried;
  const bool all_valid =
      std::all_of(valid, valid + cap_words, [](uint64_t w) { return w == ~uint64_t{0}; });
  const uint64_t fast_only = kNoNewWork | kNotStopping | kCoordinatorIdle;
  if ((status & fast_only) == fast_only && all_valid &&
      PlanCarried(ready, words.size(), &carried)) {
    carried_.start = Clock::now();
    HORA_ASSIGN_OR_RETURN(carried_.ran, AllreduceAndCarrying(control_, words, &carried));
  } else {
    HORA_RETURN_IF_ERROR(AllreduceAnd(control_, words));
  }

  uint64_t invalidated = 0;
  for (size_t w = 0; w < cap_words; ++w) valid[w] = ~valid[w];  // now: the invalid bits
  ForEachSetBit(valid, cache_.capacity(), [&](size_t b) {
    if (!cache_.Occupied(b)) return;
    if (Pending* p = FindTaken(cache_.At(b).name)) p->state = State::kNew;
    cache_.Erase(b);
    ++invalidated;
  });
  if (carried_.ran) {
    // Every rank carried the same allreduce with the same bits (all valid,
    // no new work, none stopping, the coordinator idle): that batch, already
    // run, is the whole cycle (Execute finishes it); no decisions. Used in
    // bit order, as below.
    for (const Pending* p : carried_.batch) cache_.Touch(p->cache_bit);
    CountNegotiated(hits, misses, invalidated);
    *stop_everywhere = false;
    quiet_everywhere_ = (status & kQuiet) != 0;
    return Status::Ok();
  }
  // Fast path: cached tensors ready on every rank, in bit order. A group
  // runs only whole: if some of its members are not ready everywhere (an
  // entry was just invalidated), its ready members go to the coordinator
  // with the rest (every rank sees the same bits, so all decide alike).
  // Keyed by views of the cached decisions' group names (nothing is erased
  // from the cache below).
  std::unordered_map<std::string_view, uint32_t> group_ready;
  ForEachSetBit(ready, cache_.capacity(), [&](size_t b) {
    if (cache_.Occupied(b) && !cache_.At(b).group.empty()) ++group_ready[cache_.At(b).group];
  });
  bool demoted = false;
  ForEachSetBit(ready, cache_.capacity(), [&](size_t b) {
    if (!cache_.Occupied(b)) return;
    const RequestMeta& m = cache_.At(b);
    if (!m.group.empty() && group_ready[m.group] < m.group_size) {
      if (Pending* p = FindTaken(m.name)) p->state = State::kNew;
      demoted = true;
      return;
    }
    out->push_back({cache_.Shared(b), mine_at(b)});
    cache_.Touch(b);
  });
  CountNegotiated(hits, misses, invalidated);
  *stop_everywhere = (status & kNotStopping) == 0;
  quiet_everywhere_ = (status & kQuiet) != 0;
  if ((status & kNoNewWork) && (status & kCoordinatorIdle) && invalidated == 0 && !demoted) {
    return Status::Ok();
  }
  return SlowPath(out);
}

void Engine::CountNegotiated(uint64_t hits, uint64_t misses, uint64_t invalidated) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.cache_hits += hits;
  stats_.cache_misses += misses;
  stats_.cache_invalidations += invalidated;
}

Status Engine::SlowPath(std::vector<Decision>* out) {
  SlowScratch& s = slow_;
  s.mine.clear();
  s.waited.clear();
  const TimePoint sending = Clock::now();
  for (Pending* p = taken_.front(); p != nullptr; p = p->next) {
    if (p->state != State::kNew) continue;
    s.mine.push_back(p->sub.meta);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(sending - p->taken).count();
    s.waited.push_back(static_cast<uint32_t>(std::clamp<int64_t>(ms, 0, UINT32_MAX)));
    p->state = State::kSent;
  }
  EncodeRequests(s.mine, &s.encoded, &s.waited);
  HORA_ASSIGN_OR_RETURN(auto gathered, GatherBytes(control_, 0, s.encoded));
  s.responses.clear();
  uint64_t bytes = rank_ == 0 ? 0 : s.encoded.size() + 8;
  if (coordinator_) {
    const TimePoint now = Clock::now();
    for (int p = 0; p < size_; ++p) {
      const auto& raw = gathered[static_cast<size_t>(p)];
      Status decoded = DecodeRequests(raw.data(), raw.size(), &s.peer, &s.peer_waited);
      if (!decoded.ok()) {
        return decoded.WithContext("rank 0: engine coordinator: from rank " + std::to_string(p));
      }
      coordinator_->Add(p, s.peer, now, &s.peer_waited);
      if (p != 0) bytes += raw.size() + 8;
    }
    for (const std::string& report : coordinator_->StallReports(now)) {
      logger_.Warning("stall: " + (label_.empty() ? "" : label_ + ": ") + report);
    }
    coordinator_->TakeResponses(now, &s.decided);
    EncodeResponses(s.decided, &s.responses);
  }
  HORA_RETURN_IF_ERROR(BroadcastBytes(control_, 0, s.responses));
  bytes += s.responses.size() + 8;
  HORA_RETURN_IF_ERROR(DecodeResponses(s.responses.data(), s.responses.size(), &s.decided));
  uint64_t evicted_before = cache_.evictions();
  for (Response& r : s.decided) {
    auto shared = std::make_shared<const Response>(std::move(r));
    if (shared->error.empty() && shared->params.cacheable) cache_.Insert(shared);
    out->push_back({std::move(shared), nullptr});
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.slow_cycles;
  stats_.coordinator_bytes += bytes;
  stats_.cache_evictions += cache_.evictions() - evicted_before;
  return Status::Ok();
}

std::string Engine::NegotiatedTensors() const {
  const std::string label = label_.empty() ? "" : label_ + ": ";
  const Pending* first = taken_.front();
  if (first == nullptr) return label + "the negotiation of an idle engine";
  size_t more = 0;
  for (const Pending* p = first->next; p != nullptr; p = p->next) ++more;
  return label + UserName(first->sub.meta) +
         (more == 0 ? "" : " and " + std::to_string(more) + " more tensor" + (more > 1 ? "s" : ""));
}

void Engine::FailAll(const Status& st) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = st.ok() ? AbortedError("the engine stopped") : st;
    if (!label_.empty()) stopped_ = stopped_.WithContext(label_);
    for (Pending* p : queue_) {
      std::shared_ptr<Handle::State> handle = std::move(p->sub.handle);
      p->in_flight = false;
      handle->Complete(stopped_);
    }
    queue_.clear();
  }
  std::vector<Pending*> all;
  for (Pending* p = taken_.front(); p != nullptr; p = p->next) all.push_back(p);
  for (auto& [name, p] : phantoms_) all.push_back(&p);
  Finish(all, st);
}

}  // namespace hora
