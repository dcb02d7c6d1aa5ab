// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Elastic mode's part of the job's loop (job_run.h): the driver's rounds
// (worlds formed, late workers stopped, the job's end), and host discovery
// (host_discovery.h): workers started on new slots, stopped on slots gone,
// and the store's counters of host updates (launch/elastic_place.h) that
// rank 0's check_host_updates() reads.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

#include "host_discovery.h"
#include "job_run.h"
#include "launch/elastic_place.h"
#include "process_group.h"

namespace hora::horarun::job_internal {

void Job::StopWorker(Rank& r, Clock::time_point now) {
  // (Its last lines are no rank's of the world: they carry its id.)
  for (auto& f : r.forward) {
    if (f) f->SetLabel(WorkerId(r.placement));
  }
  TerminateGroup(r.pid);
  r.stopped = true;
  r.stop_kill_at = now + Seconds(spec_.stop_grace_s);
}

void Job::PollDriver(Clock::time_point now) {
  if (!driver_) return;
  if (stopping_) {
    // After the driver ended the job, workers that come to init() before
    // their stop are still told why (Poll answers them; it plans nothing).
    if (driver_->planner().ended()) (void)driver_->Poll(now);
    return;
  }
  for (auto& r : ranks_) {  // stopped workers that outlive the grace period
    if (r.running && r.stopped && now >= r.stop_kill_at) {
      kill(-r.pid, SIGKILL);
      r.stop_kill_at = Clock::time_point::max();
    }
  }
  if (!spec_.elastic->discovery_script.empty()) {
    // (On a thread of its own: the loop forwards output and sees deaths
    // and signals meanwhile. A run a second after the last one started.)
    if (!discovery_) {
      discovery_ = std::make_unique<BackgroundDiscovery>(spec_.elastic->discovery_script,
                                                         std::chrono::seconds(10));
    }
    if (now >= discover_at_ && discovery_->Start()) discover_at_ = now + std::chrono::seconds(1);
    if (std::optional<Result<std::string>> output = discovery_->Take()) {
      Discover(now, std::move(*output));
    }
  }
  if (now >= frozen_check_at_) {
    TakeOutFrozen(now);
    frozen_check_at_ = now + std::chrono::milliseconds(250);
  }
  auto d = driver_->Poll(now);
  if (!d.ok()) {
    std::fprintf(stderr, "horarun: elastic mode: %s; stopping the job\n",
                 d.status().ToString().c_str());
    BeginStop(1, true);
    return;
  }
  for (const std::string& id : d->stop) {
    for (auto& r : ranks_) {
      if (r.running && WorkerId(r.placement) == id) {
        const bool surplus =
            std::find(d->surplus.begin(), d->surplus.end(), id) != d->surplus.end();
        std::fprintf(stderr,
                     surplus ? "horarun: worker %s is one more than --max-np; stopping it\n"
                             : "horarun: worker %s did not come back to init() while the others "
                               "waited (--elastic-timeout); stopping it\n",
                     id.c_str());
        StopWorker(r, now);
      }
    }
  }
  // From here on, each member's lines carry its rank in the new world, and
  // any other worker's (out of it, or gone) its id: no two the same label.
  if (!d->assign.empty()) {
    std::map<std::string, int> rank_of;
    for (const ElasticPlanner::Assignment& a : d->assign) rank_of[a.id] = a.placement.rank;
    for (auto& r : ranks_) {
      const std::string id = WorkerId(r.placement);
      const auto it = rank_of.find(id);
      for (auto& f : r.forward) {
        if (!f) continue;
        if (it != rank_of.end() && r.running) {
          f->SetRank(it->second);
        } else {
          f->SetLabel(id);
        }
      }
    }
  }
  if (!d->assign.empty() && d->generation > 1) {
    std::fprintf(stderr, "horarun: elastic: world %lld formed with %zu worker(s)\n",
                 static_cast<long long>(d->generation), d->assign.size());
  }
  if (!d->assign.empty()) {
    // The others have left the last world: so has a leaving worker (at the
    // same commit, or the same failure), which now waits in init().
    for (auto& r : ranks_) {
      if (!r.running || r.stopped || !r.leaving) continue;
      std::fprintf(stderr, "horarun: elastic: worker %s left with its slot; stopping it\n",
                   WorkerId(r.placement).c_str());
      StopWorker(r, now);
    }
  }
  if (d->notice) std::fprintf(stderr, "horarun: elastic: %s\n", d->notice->c_str());
  if (d->end) {
    std::fprintf(stderr, "horarun: elastic: %s; stopping the job\n", d->end->c_str());
    BeginStop(1, false);  // (the waiting workers first say why, themselves)
  }
}

void Job::TakeOutFrozen(Clock::time_point now) {
  // A worker the others wait for in init() that is stopped or frozen would
  // keep them there until --elastic-timeout: it is taken out now, and
  // handled as any lost worker (its death re-forms the world). Seen two
  // ways: here, a local worker's process group with a stopped member
  // (SIGSTOP, a debugger): killed at once; anywhere, a member of its last
  // world that found it silent and said so in the store (ElasticSilentKey):
  // stopped as any worker (on another host, its watcher ends it there).
  const std::string job = JobId();
  for (const std::string& id : driver_->planner().Late()) {
    for (auto& r : ranks_) {
      if (!r.running || r.stopped || r.frozen_killed || WorkerId(r.placement) != id) continue;
      if (IsLocalHost(r.placement.host) && GroupHasStoppedMember(r.pid)) {
        std::fprintf(stderr,
                     "horarun: elastic: worker %s (pid %d) is stopped (SIGSTOP or a debugger) "
                     "while the others wait for it in init(); killing it\n",
                     id.c_str(), r.pid);
        kill(-r.pid, SIGKILL);
        r.frozen_killed = true;
        continue;
      }
      const auto place = driver_->planner().LastPlace(id);
      if (!place || store_ == nullptr || job.empty()) continue;
      const Result<Bytes> said =
          store_->Get(ElasticSilentKey(job, place->first, place->second), Duration::zero());
      if (!said.ok()) continue;
      std::fprintf(stderr,
                   "horarun: elastic: worker %s (rank %d of world %lld) is silent while the others "
                   "wait for it in init() (%s); stopping it\n",
                   id.c_str(), place->second, static_cast<long long>(place->first),
                   std::string(said->begin(), said->end()).c_str());
      StopWorker(r, now);
      // (On another host, the end of its stdin starts its watcher's TERM,
      // CONT and KILL there.)
      if (r.stdin_fd >= 0) close(std::exchange(r.stdin_fd, -1));
      r.frozen_killed = true;
    }
  }
}

void Job::HostFailed(const std::string& host, Clock::time_point now) {
  if (spec_.elastic->discovery_script.empty()) return;  // (no slot is filled again)
  const auto [lo, hi] = spec_.elastic->cooldown_s;
  const int n = ++failures_[host];
  if (hi <= 0) {
    left_out_[host] = Clock::time_point::max();
    std::fprintf(stderr, "horarun: elastic: host %s gets no new worker (a worker failed there)\n",
                 host.c_str());
    return;
  }
  const double s = std::min(hi, lo * static_cast<double>(int64_t{1} << std::min(n - 1, 30)));
  left_out_[host] = now + Seconds(s);
  std::fprintf(stderr,
               "horarun: elastic: host %s gets no new worker for %g s (%d failure(s) there)\n",
               host.c_str(), s, n);
}

void Job::Discover(Clock::time_point now, Result<std::string> output) {
  if (done_) return;  // (a worker finished the work: no new ones)
  const JobSpec::Elastic& e = *spec_.elastic;
  auto found = output.ok() ? ParseDiscoveredHosts(*output, e.slots_per_host)
                           : Result<std::vector<HostSlots>>(output.status());
  if (found.ok() && found->empty()) {
    // (Most likely a file read while it was rewritten: every worker would
    // stop, and the job end, for one empty answer.)
    found =
        UnavailableError("the host discovery script '" + e.discovery_script + "' names no host");
  }
  if (!found.ok()) {
    if (found.status().message() != discovery_error_) {  // (once, not every second)
      discovery_error_ = found.status().message();
      std::fprintf(stderr, "horarun: elastic: %s; keeping the hosts it named before\n",
                   discovery_error_.c_str());
    }
    return;
  }
  discovery_error_.clear();
  std::map<std::string, int> slots;
  for (const HostSlots& h : *found) slots[h.host] = h.slots;
  // (Each look: slots changed, or freed by a failure, or a host back from
  // its cooldown.) Live workers by host, oldest first.
  std::map<std::string, std::vector<Rank*>> on;
  int live = 0;
  for (Rank& r : ranks_) {
    if (r.running && !r.stopped && !r.leaving) {
      on[r.placement.host].push_back(&r);
      ++live;
    }
  }
  bool removed = false, added = false;
  // Slots gone: their newest workers leave, as in Horovod: out of the next
  // world, but training on with this one up to the commit where every
  // member hears of it (HostsUpdatedInterrupt: nothing is rolled back);
  // stopped once the others have formed the next world (PollDriver). One
  // that fails meanwhile is lost as any other.
  for (auto& [host, workers] : on) {
    auto it = slots.find(host);
    const size_t keep = it == slots.end() ? 0 : static_cast<size_t>(it->second);
    while (workers.size() > keep) {
      Rank& r = *workers.back();
      const std::string id = WorkerId(r.placement);
      if (driver_->planner().InLatestGeneration(id)) {
        std::fprintf(stderr, "horarun: elastic: host %s %s; worker %s leaves at the next commit\n",
                     host.c_str(), keep == 0 ? "is gone" : "has fewer slots", id.c_str());
        r.leaving = true;
        driver_->Leaves(id, now);
      } else {  // (no world to finish: waiting for its first, or left out)
        std::fprintf(stderr, "horarun: elastic: host %s %s; stopping worker %s (in no world)\n",
                     host.c_str(), keep == 0 ? "is gone" : "has fewer slots", id.c_str());
        StopWorker(r, now);
        driver_->Ended(id, now);
      }
      workers.pop_back();
      --live;
      removed = true;
    }
  }
  // Free slots: workers there, up to --max-np live, but not on hosts left
  // out after a failure.
  std::vector<Placement> starting;
  for (const HostSlots& h : *found) {
    auto out = left_out_.find(h.host);
    if (out != left_out_.end() && now < out->second) continue;
    const int have = static_cast<int>(on[h.host].size());
    for (int k = have; k < h.slots && live < e.settings.max_np; ++k) {
      if (e.store_on_loopback && !IsLocalHost(h.host)) {
        std::fprintf(stderr,
                     "horarun: elastic: no worker on %s: the job's store listens on 127.0.0.1 "
                     "only, as the job's first workers were all placed on this host (give "
                     "--bind ADDR for other hosts)\n",
                     h.host.c_str());
        break;
      }
      Placement p;
      p.host = h.host;
      // (Its id's index: never used before.)
      p.rank = static_cast<int>(ranks_.size() + starting.size());
      starting.push_back(p);
      ++live;
    }
  }
  const auto prospects = Prospects(starting, now);
  for (size_t i = 0; i < starting.size(); ++i) {
    const Placement& p = starting[i];
    if (!StartRank(p, prospects[i])) {
      std::fprintf(stderr, "horarun: elastic: worker %s did not start\n", WorkerId(p).c_str());
      break;  // (the next one's id would be this one's)
    }
    std::fprintf(stderr, "horarun: elastic: host %s has a free slot; started worker %s\n",
                 p.host.c_str(), WorkerId(p).c_str());
    added = true;
  }
  // The members learn of it at their next commit (check_host_updates).
  if (Status told = driver_->CountHostUpdates(added, removed); !told.ok()) {
    std::fprintf(stderr, "horarun: elastic: cannot tell the workers of the new hosts: %s\n",
                 told.ToString().c_str());
  }
}

}  // namespace hora::horarun::job_internal
