// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/engine.h"

#include <algorithm>
#include <utility>

#include "common/clock.h"
#include "common/thread_name.h"

namespace hora {
namespace {

// The first `n` bytes of `s` or fewer, not cutting a UTF-8 character.
std::string Head(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

// Why `s`'s name (or group name) cannot go to the other ranks, or OK: a
// request with a longer one would not decode there.
Status CheckNames(int rank, const Submission& s) {
  const RequestMeta& m = s.meta;
  for (const std::string* name : {&s.name(), &m.group}) {
    if (name->size() <= kMaxNameBytes) continue;
    return InvalidArgument("rank " + std::to_string(rank) + ": " + OpTypeName(m.op) + " '" +
                           Head(*name, 32) + "...': its " +
                           (name == &s.name() ? "name" : "group name") + " is " +
                           std::to_string(name->size()) + " bytes long; names are at most " +
                           std::to_string(kMaxNameBytes) + " bytes");
  }
  return Status::Ok();
}

}  // namespace

Engine::Engine(const Config& config, ControlPlane& control, CollectiveBackend& data,
               const Logger& logger, std::string label, std::vector<int> job_ranks,
               std::unique_ptr<DeviceBatches> device, std::shared_ptr<OutputPool> outputs,
               std::unique_ptr<Autotuner> tuner)
    : config_(config),
      control_(control),
      data_(data),
      logger_(logger),
      label_(label),
      rank_(control.rank()),
      job_rank_(job_ranks.empty() ? rank_ : job_ranks.at(static_cast<size_t>(rank_))),
      size_(control.size()),
      spin_(SecondsToDuration(config.wait_spin_us * 1e-6)),
      // The engine's own poll never outlasts a cycle: it must not keep the
      // others waiting for its negotiation longer than an idle wait would.
      idle_spin_(std::min(spin_, CycleTimeOf(config.cycle_time_ms))),
      cycle_time_ticks_(CycleTimeOf(config.cycle_time_ms).count()),
      records_(std::max<size_t>(kKeptRecords, config.cache_capacity)),
      last_cycle_end_(Clock::now().time_since_epoch().count()),
      device_(std::move(device)),
      outputs_(std::move(outputs)),
      tuner_(std::move(tuner)),
      negotiator_(config, control, logger, std::move(label), std::move(job_ranks),
                  [this](const std::string& name) -> Ticket* { return FindTaken(name); }) {
  gate_ = std::make_shared<DriveGate>(this);
  thread_ = std::thread([this] {
    NameThisThread("hora-engine");
    Loop();
    WatchAfterStop();
  });
}

Engine::~Engine() {
  // (A batch waiting for its turn to make NCCL calls, behind another set's
  // tensors that may never run, fails instead: also a waiter's, driving.)
  if (device_) device_->Cancel();
  gate_->Close();  // no waiter drives from here on
  {
    MutexLock lock(mu_);
    stop_requested_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Handle Engine::Submit(Submission&& s) {
  Handle h;
  if (RunsAtSubmission(s.meta) && RunNow(s, &h)) return h;
  if (Status st = Queue({&s, 1}, &h); !st.ok()) return FailedHandle(s.name(), std::move(st));
  return h;
}

std::vector<Handle> Engine::SubmitGroup(std::vector<Submission> members) {
  std::vector<Handle> handles(members.size());
  if (Status st = Queue(members, handles.data()); !st.ok()) {
    for (size_t i = 0; i < members.size(); ++i) handles[i] = FailedHandle(members[i].name(), st);
  }
  return handles;
}

Status Engine::Queue(std::span<Submission> members, Handle* handles) {
  for (const Submission& s : members) HORA_RETURN_IF_ERROR(CheckNames(job_rank_, s));
  auto in_flight = [&](const Submission& s) {
    const RequestMeta& m = s.meta;
    return InvalidArgument("rank " + std::to_string(job_rank_) + ": " +
                           (m.group.empty()
                                ? std::string(OpTypeName(m.op)) + " '" + s.name() +
                                      "': a tensor of that name is already in flight on this rank "
                                      "(names must be unique among unfinished collectives)"
                                : "group '" + m.group + "': a tensor named '" + s.name() +
                                      "' is already in flight on this rank"));
  };
  bool wake = false;
  {
    MutexLock lock(mu_);
    if (!stopped_.ok()) return stopped_;
    // All or none: a group's names (which differ from each other,
    // "<group>.<i>") are all checked before one is claimed, and the records
    // found kept for the claims (records stay where they are); a lone
    // tensor's is looked up once.
    const bool group = members.size() > 1;
    if (group) {
      found_.clear();
      for (const Submission& s : members) {
        TensorRecord* r = records_.Find(s.name());
        if (r != nullptr && r->in_flight) return in_flight(s);
        found_.push_back(r);
      }
    }
    const bool starts_queue = queue_.empty();
    for (size_t i = 0; i < members.size(); ++i) {
      Submission& s = members[i];
      // (a new record or an idle one, or one in flight)
      TensorRecord& r = group && found_[i] != nullptr ? *found_[i] : records_.Get(s.name());
      if (r.in_flight) return in_flight(s);  // (a lone tensor: nothing claimed)
      Claim(r, std::move(s), &handles[i]);
    }
    queued_.store(true, std::memory_order_release);
    submissions_.store(submissions_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    // While waiters drive, a waiter (or the engine's thread, a cycle time
    // on) will run it.
    wake = !defer_.load(std::memory_order_relaxed) || (starts_queue && DeferredWakeDueLocked());
  }
  if (wake) cv_.notify_one();
  return Status::Ok();
}

bool Engine::DeferredWakeDueLocked() const {
  return unwaited_ && sleeps_until_ > first_queued_ + CycleTime();
}

void Engine::SetStopReason(std::string why) {
  MutexLock lock(mu_);
  stop_reason_ = std::move(why);
}

void Engine::SetTimeline(std::shared_ptr<Timeline> timeline) {
  MutexLock lock(mu_);
  timeline_ = std::move(timeline);
}

EngineStats Engine::stats() const {
  MutexLock lock(mu_);
  EngineStats s = stats_;
  s.name_records = records_.size();
  return s;
}

bool Engine::Cycle(const std::vector<TensorRecord*>& fresh, bool stopping) {
  const uint64_t done_before = finished_tensors_;
  const TimePoint taken = Clock::now();
  for (TensorRecord* p : fresh) {
    // (Not stamped when the timeline started after its submission.)
    if (cycle_timeline_ && p->submitted != TimePoint{}) {
      cycle_timeline_->Span(p->meta.name, "queued", p->submitted, taken);
    }
    p->listed = true;
    negotiator_.Take(p, taken);
  }
  CycleOutcome* outcome = nullptr;
  Status st = negotiator_.Negotiate(stopping, fresh.empty(), taken, &outcome);
  {
    MutexLock lock(mu_);
    stats_.AddCycle(outcome->counts);
  }
  if (!st.ok()) {
    // An elastic job expects its world to break (a peer lost or shut down):
    // the program resets, so that is a warning there, not an error.
    const bool world_broke = st.code() == StatusCode::kUnavailable ||
                             st.code() == StatusCode::kAborted || st.code() == StatusCode::kTimeout;
    if (world_broke && !config_.worker_id.empty()) {
      logger_.Warning("engine: " + st.ToString() +
                      " (an elastic job: training under elastic.run resets)");
    } else {
      logger_.Error("engine: " + st.ToString());
    }
    // NCCL's queued work waits for peers that may never come (a lost rank):
    // ended now, so that the streams behind it (the framework's too) go on.
    if (device_) device_->Abort(st.ToString());
    FailAll(st);
    return false;
  }
  if (outcome->retuned) {
    Retune(*outcome->retuned);
    MutexLock lock(mu_);
    ++stats_.settings_taken;
  }
  Execute(*outcome);
  busy_ = !outcome->quiet_everywhere || finished_tensors_ != done_before;
  idle_everywhere_ = outcome->idle_everywhere;
  if (outcome->stop_everywhere) {
    // Every rank stops here: the last collective step, which frees the GPU
    // window once no rank maps it.
    if (device_) {
      if (Status closed = device_->Close(); !closed.ok()) {
        logger_.Warning("engine: " + closed.ToString());
      }
    }
    const std::string who = negotiator_.StoppingRanks(stopping);  // (every rank asks)
    std::string why;
    {
      MutexLock lock(mu_);
      why = stop_reason_;
      stopped_by_peer_ = !stopping;
    }
    FailAll(AbortedError("rank " + std::to_string(job_rank_) + ": the engine stopped: " +
                         (why.empty() ? who + " (shutdown(), or the end of its process)" : why)));
    return false;
  }
  return true;
}

bool Engine::StoppedByPeer() const {
  MutexLock lock(mu_);
  return stopped_by_peer_;
}

void Engine::FailAll(const Status& st) {
  {
    MutexLock lock(mu_);
    stopped_ = st.ok() ? AbortedError("the engine stopped") : st;
    if (!label_.empty()) stopped_ = stopped_.WithContext(label_);
    for (TensorRecord* p : queue_) {
      Handle handle = std::move(p->handle);
      p->in_flight = false;
      if (device_) device_->Released(*p);
      handle.state()->Complete(stopped_);
    }
    queue_.clear();
  }
  std::vector<TensorRecord*> all;
  for (Ticket* t = negotiator_.first_taken(); t != nullptr; t = t->next) {
    all.push_back(static_cast<TensorRecord*>(t));
  }
  placeholders_.ForEach([&](TensorRecord* p) { all.push_back(p); });
  Finish(all, st);
}

}  // namespace hora
