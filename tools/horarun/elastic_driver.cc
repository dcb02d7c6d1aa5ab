// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "elastic_driver.h"

#include <tuple>
#include <utility>

#include "launch/elastic_place.h"

namespace hora::horarun {

void ElasticDriver::Started(const std::string& id, const std::string& host,
                            ElasticPlanner::Clock::time_point now) {
  arrived_[id] = 0;
  answered_[id] = 0;
  planner_.Started(id, host, now);
}

void ElasticDriver::Ended(const std::string& id, ElasticPlanner::Clock::time_point now) {
  if (planner_.InLatestGeneration(id)) {
    // Its world, should it still be connecting, stops waiting for it
    // (api/abortable_store.h); a connected one never reads this.
    const int64_t g = planner_.generation();
    const std::string why =
        "worker " + id + " of world " + std::to_string(g) + " ended while the world was forming";
    broken_status_ = store_.Set(ElasticBrokenKey(job_, g), Bytes(why.begin(), why.end()));
  }
  arrived_.erase(id);
  planner_.Ended(id, now);
}

void ElasticDriver::Leaves(const std::string& id, ElasticPlanner::Clock::time_point now) {
  arrived_.erase(id);
  planner_.Ended(id, now);
}

Status ElasticDriver::CountHostUpdates(bool added, bool removed) {
  Status first;
  for (const auto& [happened, key, count] :
       {std::tuple{added, ElasticHostsAddedKey(job_), &hosts_added_},
        std::tuple{removed, ElasticHostsRemovedKey(job_), &hosts_removed_}}) {
    if (!happened) continue;
    Result<int64_t> n = store_.Add(key, 1);
    if (!n.ok()) {
      // (It may have been counted all the same: the places say what the
      // store holds, as the members will read it.)
      if (Result<int64_t> now = store_.Add(key, 0); now.ok()) *count = *now;
      if (first.ok()) first = n.status();
      continue;
    }
    *count = *n;
  }
  return first;
}

Status ElasticDriver::Answer(const std::string& id, int64_t arrival, const std::string& text) {
  answered_[id] = arrival;
  return store_.Set(ElasticAssignmentKey(job_, id, arrival), Bytes(text.begin(), text.end()));
}

Result<ElasticPlanner::Decision> ElasticDriver::Poll(ElasticPlanner::Clock::time_point now) {
  HORA_RETURN_IF_ERROR(std::exchange(broken_status_, Status::Ok()));
  // One read while nobody arrives; each worker's key once some did (a
  // worker counts itself there after its own key), and at least every
  // second (a worker that does not count itself there, of another
  // version, is seen all the same, a second late at most).
  HORA_ASSIGN_OR_RETURN(const int64_t arrivals, store_.Add(ElasticArrivalsKey(job_), 0));
  if (arrivals != arrivals_read_ || now >= read_all_at_) {
    read_all_at_ = now + std::chrono::seconds(1);
    for (auto& [id, seen] : arrived_) {
      HORA_ASSIGN_OR_RETURN(const int64_t n, store_.Add(ElasticArrivalKey(job_, id), 0));
      if (n > seen) {
        seen = n;
        planner_.Arrived(id, n, now);
      }
    }
    arrivals_read_ = arrivals;
  }
  ElasticPlanner::Decision d;
  if (end_.empty()) d = planner_.Decide(now);
  for (const ElasticPlanner::Assignment& a : d.assign) {
    const Placement& p = a.placement;
    // (The counts as the planner decided: every worker started before is
    // in this world or left out of it, every one stopped is out.)
    ElasticPlace place{d.generation,
                       {p.rank, static_cast<int>(d.assign.size()), p.local_rank, p.local_size,
                        p.cross_rank, p.cross_size, "horarun (elastic)"},
                       hosts_added_,
                       hosts_removed_};
    HORA_RETURN_IF_ERROR(Answer(a.id, a.arrival, FormatElasticPlace(place)));
    // Its previous arrival's answer, read before it came again: not kept
    // (horarun's store would hold one a worker a reset otherwise).
    if (a.arrival > 1) (void)store_.Delete(ElasticAssignmentKey(job_, a.id, a.arrival - 1));
  }
  for (const std::string& id : d.stop) {
    // (Its next init(), should it come, fails at once.)
    const int64_t next = arrived_.count(id) ? arrived_[id] + 1 : 1;
    HORA_RETURN_IF_ERROR(Answer(id, next,
                                FormatElasticEnd("worker " + id +
                                                 " was left out of the job: it did not come to "
                                                 "init() while the others waited "
                                                 "(--elastic-timeout)")));
    arrived_.erase(id);
  }
  if (d.end) end_ = *d.end;
  if (!end_.empty()) {
    // Every worker waiting now, or arriving later, is told.
    for (const auto& [id, seen] : arrived_) {
      if (seen > answered_[id]) HORA_RETURN_IF_ERROR(Answer(id, seen, FormatElasticEnd(end_)));
    }
  }
  return d;
}

}  // namespace hora::horarun
