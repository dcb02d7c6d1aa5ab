// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The store side of horarun's elastic mode (docs/dev/elastic.md): reads
// each live worker's arrivals in init() from the job's store, asks the
// planner (elastic_planner.h), and writes its answers back: each member's
// place in a new generation, or the job's end to every worker waiting.
// A worker left out (the planner's `stop`) is told so at its next arrival.
// The caller stops the processes the decisions name.
//
// Not thread-safe: horarun's run loop owns it.
#pragma once

#include <map>
#include <string>

#include "elastic_planner.h"
#include "store/store.h"

namespace hora::horarun {

class ElasticDriver {
 public:
  ElasticDriver(Store& store, std::string job, ElasticPlanner::Settings settings)
      : store_(store), job_(std::move(job)), planner_(settings) {}

  void Started(const std::string& id, const std::string& host,
               ElasticPlanner::Clock::time_point now);
  void Ended(const std::string& id, ElasticPlanner::Clock::time_point now);
  // Worker `id` is out of the next world, its process alive: unlike Ended,
  // its world (connecting or not) is not broken, since it takes part.
  void Leaves(const std::string& id, ElasticPlanner::Clock::time_point now);
  // Host discovery started workers (`added`) or took slots away
  // (`removed`) since the last call, after telling Started/Ended/Leaves:
  // adds 1 to each counter the members read at their commits
  // (ElasticHostsAddedKey, ElasticHostsRemovedKey). Each world formed after
  // is told the counts it was formed after, so that only a later update
  // resets it.
  Status CountHostUpdates(bool added, bool removed);

  // One round: arrivals in, decisions out (also written to the store).
  // Once the job ends (the planner's end, or Finish), no more worlds are
  // formed, and every worker waiting, or arriving later, is told why.
  Result<ElasticPlanner::Decision> Poll(ElasticPlanner::Clock::time_point now);
  // The job is ending for `why` (a worker finished its work).
  void Finish(const std::string& why) {
    if (end_.empty()) end_ = why;
  }

  const ElasticPlanner& planner() const { return planner_; }

 private:
  Status Answer(const std::string& id, int64_t arrival, const std::string& text);

  Store& store_;
  const std::string job_;
  ElasticPlanner planner_;
  int64_t arrivals_read_ = 0;                      // ElasticArrivalsKey when last read
  ElasticPlanner::Clock::time_point read_all_at_;  // every worker's key, by then at the latest
  std::map<std::string, int64_t> arrived_;         // live workers: arrivals read
  std::map<std::string, int64_t> answered_;        // their last arrival answered
  std::string end_;                                // once the job ends: why
  int64_t hosts_added_ = 0, hosts_removed_ = 0;    // the counters as last counted
  Status broken_status_;  // the last write of a broken key (Poll reports a failure)
};

}  // namespace hora::horarun
