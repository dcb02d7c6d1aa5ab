// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Who runs the engine's cycles, and when.
//
// An engine wakes as soon as a tensor is submitted (while more follow within
// a few microseconds, it lets the burst end first, so that one cycle takes
// it); while idle it still looks every HORA_CYCLE_TIME_MS, so that no rank
// waits on an idle one for long, and joins a cycle -- on one host, only when
// some rank has waited for it that long (idle engines there do not cycle at
// all); across hosts, at every look. Looks that find nothing to do (across
// hosts: whose cycle found every rank idle) come further apart, up to 16
// cycle times; a rank that has tensors of its own looks every cycle time.
//
// A thread waiting on one of the engine's handles runs cycles itself while
// it spins (Drive): on a host whose ranks outnumber the spare cores, the
// hand-off to the engine's thread and back would be two thread switches per
// collective. A cycle runs on one thread at a time (cycle_mu_), the engine's
// or a waiter's; the engine's thread keeps cycling whenever no waiter does,
// and takes over whatever a waiter leaves (handoff_).
// Once waiters drive, submissions no longer wake the engine's thread: a
// cycle it started would often miss the rest of a burst (the waiter's cycle
// takes all of it); what no waiter takes up within a cycle time, it runs
// (the first time, once its next look comes: see sleeps_until_).
// Once the engine has stopped, its thread still watches the NCCL work
// queued on the GPU until that ends (WatchAfterStop).
#include <algorithm>
#include <optional>
#include <thread>

#include "common/clock.h"
#include "engine/engine.h"
#include "engine/idle_backoff.h"
#include "engine/submission_burst.h"

namespace hora {

void Engine::Loop() {
  Duration cycle_time = CycleTime();
  IdleBackoff looks(cycle_time);
  constexpr Duration kMinRewait = std::chrono::milliseconds(1);
  auto last_end = [&] {
    return TimePoint(Clock::duration(last_cycle_end_.load(std::memory_order_acquire)));
  };
  for (;;) {
    if (CycleTime() != cycle_time) {  // (autotuning)
      cycle_time = CycleTime();
      looks = IdleBackoff(cycle_time);
    }
    // Go at once while work is moving somewhere (this rank ran something,
    // or some rank got new tensors last cycle) and this rank has tensors
    // waiting; otherwise join the others every cycle time, or as soon as
    // something is submitted here. Right after work moved, the next
    // submission usually follows within microseconds: spin for it first
    // (unless a waiter is driving the cycles). A submission that wakes this
    // thread is often the first of a burst: WaitOutSubmissionBurst lets it end.
    bool idle = true, spin = false, nothing_taken = false;
    {
      // While a waiter is in a cycle, wait for its hand-off (below) rather
      // than queue behind it for the lock: that would be a sleep and a
      // wake-up per cycle, on cores the ranks share.
      if (cycle_mu_.try_lock()) {
        const bool finished = finished_;
        nothing_taken = negotiator_.nothing_taken();
        idle = nothing_taken || !busy_;
        spin = idle && busy_ && !driven_ && !defer_.load(std::memory_order_relaxed);
        cycle_mu_.unlock();
        if (finished) return;
        if (!nothing_taken) looks.Busy();
      }
    }
    if (spin && drivers_.load(std::memory_order_acquire) == 0) {
      SpinUntil([&] { return queued_.load(std::memory_order_acquire); }, idle_spin_);
    }
    bool stop;
    bool woken = false;    // by a submission, a driver's hand-off or stop
    bool handoff = false;  // a driver left work behind
    {
      MutexLock lock(mu_);
      while (idle) {
        if (stop_requested_ || handoff_ ||
            (!queue_.empty() && !defer_ && drivers_.load(std::memory_order_acquire) == 0)) {
          woken = true;
          break;
        }
        // Queued work that waiters drive is this thread's a cycle time
        // after it came; an idle engine joins one after the last cycle.
        const bool deferred = defer_ && !queue_.empty();
        const TimePoint due_at = deferred ? first_queued_ + cycle_time : looks.NextLook(last_end());
        const TimePoint now = Clock::now();
        const int64_t end_before = last_cycle_end_.load(std::memory_order_acquire);
        if (now >= due_at) {
          // A waiter in a cycle keeps this rank in step, and takes what is
          // queued or hands it over (Drive wakes this thread then): look
          // again later.
          if (drivers_.load(std::memory_order_acquire) > 0) {
            if (nothing_taken && !deferred) looks.Backoff();
            SleepUntil(lock, now + std::max<Duration>(looks.every(), kMinRewait));
            continue;
          }
          if (deferred) {  // no waiter came
            defer_.store(false, std::memory_order_relaxed);
            unwaited_ = true;
          }
          break;
        }
        SleepUntil(lock, due_at);
        if (nothing_taken && !deferred &&
            last_cycle_end_.load(std::memory_order_acquire) != end_before)
          looks.Backoff();
      }
      stop = stop_requested_;
      handoff = handoff_;
      handoff_ = false;
    }
    if (woken && !stop && !handoff && spin_ > Duration::zero()) {
      // Whoever submitted usually waits on its handle next and drives the
      // cycle itself (waiters drive only while they spin): let it rather
      // than race it for the cycle. Submissions often come in bursts (a
      // model's layers, one after another): while they keep coming, let
      // them come (yielding: on a shared core the submitter runs), so that
      // one cycle takes the whole burst, for one idle spin at most.
      WaitOutSubmissionBurst(submissions_, drivers_, idle_spin_);
      if (drivers_.load(std::memory_order_acquire) > 0) continue;
    }
    MutexLock cycle(cycle_mu_);  // waits while a driver is in a cycle
    if (finished_) return;
    if (device_) device_->Watch(Clock::now(), /*stopped=*/false);
    // A driver may have taken the work this thread woke up for: after a
    // wake-up, cycle only if there is new work or work is moving (what a
    // driver handed over while nothing moves waits for the timer, as any
    // pending work does); after a wait that timed out, join the others as
    // an idle engine does every cycle time (on one host: once one waits for
    // it, IdleBackoff::JoinDue) -- unless a cycle (a driver's) ended meanwhile: that
    // kept this rank in step, and the timer runs on.
    const bool timed_out =
        idle && !woken && Clock::now() - looks.IdleSince(last_end()) >= cycle_time;
    const bool idle_look = timed_out && !stop && negotiator_.nothing_taken() &&
                           !queued_.load(std::memory_order_acquire);
    if (idle_look) {
      MutexLock lock(mu_);
      ++stats_.idle_wakeups;
    }
    const std::optional<bool> peer_waiting =
        idle_look ? negotiator_.PeerWaiting() : std::optional<bool>(false);
    if (idle_look && !looks.JoinDue(Clock::now(), peer_waiting,
                                    last_cycle_end_.load(std::memory_order_acquire))) {
      // With nothing to do here, a cycle would only make the others' next
      // one (their next tensors) wait for this rank's, which has none of
      // them: look again later.
      busy_ = false;  // (no spinning for submissions on the next round)
      continue;
    }
    const bool due = queued_.load(std::memory_order_acquire) || stop || timed_out ||
                     !(negotiator_.nothing_taken() || !busy_);
    driven_ = false;
    if (due && !RunCycle()) return;
    // (Nobody could tell whether a rank waited: the cycle says when to look next.)
    if (idle_look && !peer_waiting) looks.Joined(idle_everywhere_);
  }
}

void Engine::WatchAfterStop() {
  for (;;) {
    {
      MutexLock cycle(cycle_mu_);
      if (!device_ || !device_->Watch(Clock::now(), /*stopped=*/true)) return;
    }
    MutexLock lock(mu_);
    if (stop_requested_) return;  // (the destructor's, which aborts NCCL)
    SleepUntil(lock, Clock::now() + std::chrono::milliseconds(50));
  }
}

void Engine::SleepUntil(MutexLock& lock, TimePoint when) {
  sleeps_until_ = when;
  cv_.wait_until(lock.native(), when);
  sleeps_until_ = TimePoint::min();
}

bool Engine::RunCycle() {
  fresh_.clear();
  bool stopping;
  {
    MutexLock lock(mu_);
    fresh_.swap(queue_);
    queued_.store(false, std::memory_order_relaxed);
    stopping = stop_requested_;
    cycle_timeline_ = timeline_;
  }
  if (device_) device_->Watch(Clock::now(), /*stopped=*/false);  // (also on a waiter's thread)
  const bool go_on = Cycle(fresh_, stopping);
  last_cycle_end_.store(Clock::now().time_since_epoch().count(), std::memory_order_release);
  if (!go_on) {
    finished_ = true;
    return false;
  }
  return true;
}

bool Engine::Drive(const DoneFlag& done, TimePoint until) {
  drivers_.fetch_add(1);
  bool drove = false;
  bool left_work = false;
  if (cycle_mu_.try_lock()) {
    // (`until` was read from the clock just now: the first cycle runs
    // without another read.)
    for (bool first = true; !finished_ && !done.IsSet() && (first || Clock::now() < until);
         first = false) {
      drove = true;
      driven_ = true;
      {
        MutexLock lock(mu_);
        ++stats_.driven_cycles;
      }
      if (!RunCycle()) break;
    }
    left_work = !finished_ && !negotiator_.nothing_taken();
    cycle_mu_.unlock();
  }
  drivers_.fetch_sub(1);
  // The engine's thread stood aside while this thread drove: hand it what
  // is left, pending tensors and any submission it saw while this thread
  // still counted as a driver (checked under mu_, as its wait is).
  MutexLock lock(mu_);
  if (drove) defer_.store(true, std::memory_order_relaxed);  // waiters drive here
  if (left_work || !queue_.empty()) {
    handoff_ = true;
    cv_.notify_one();
  }
  return drove;
}

}  // namespace hora
