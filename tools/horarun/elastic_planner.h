// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Who is in each generation of an elastic job (docs/dev/elastic.md): the
// membership logic of horarun's elastic mode alone, with no I/O, so that
// every case is a unit test. horarun tells it what happened -- a worker
// started, arrived in init() (its n-th time), or ended -- and asks it what
// to do (Decide): the assignments of a new generation, the workers to stop,
// or the job's end.
//
// - A generation is formed when every live worker is waiting in init() and
//   there are at least min_np of them (at most max_np: the rest, newest
//   first, are stopped).
// - Ranks: hosts in the order of the lowest rank a member had before (hosts
//   with no such member after, in the order they were first seen); within a
//   host, members by their rank before, then the new ones as they started.
//   So the lowest-ranked survivor is rank 0, and its committed state is
//   what the others sync from. Local and cross ranks as PlaceRanks gives.
// - A worker that has not arrived `timeout` after the first one of a round
//   did is stopped and left out: the others would wait for it for good. A
//   round begins when a member of the last generation arrives (or anyone,
//   before the first): new workers alone wait for the members, unhurried.
// - Fewer than min_np live workers: the end at once when no new worker can
//   come (no discovery script), else after `timeout` without enough, counted
//   from when a member comes to init() for a new world (not while the
//   members train on), said then and every minute meanwhile
//   (Decision::notice), naming the counts. So is a reset past `reset_limit` (Horovod's: K allows K
//   resets; the first generation is none).
//
// Not thread-safe: horarun's run loop owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hosts.h"

namespace hora::horarun {

class ElasticPlanner {
 public:
  using Clock = std::chrono::steady_clock;
  struct Settings {
    int min_np = 1;
    int max_np = 1;
    Clock::duration timeout = std::chrono::seconds(600);  // --elastic-timeout
    std::optional<int> reset_limit;                       // --reset-limit
    // New workers can come (a host discovery script): below min_np the job
    // waits for them up to `timeout`; without, it ends at once.
    bool can_grow = true;
  };
  // One member's place in a new generation, for its arrival `arrival`.
  struct Assignment {
    std::string id;
    int64_t arrival = 0;
    Placement placement;
  };
  struct Decision {
    int64_t generation = 0;            // with `assign`: the new generation's number
    std::vector<Assignment> assign;    // a new generation (empty: none now)
    std::vector<std::string> stop;     // workers to stop, left out from now on
    std::vector<std::string> surplus;  // those of `stop` beyond max_np (the others were late)
    std::optional<std::string> end;    // the job ends: every waiting worker is told this
    // To say now: what the job waits for (below min_np: at once, then
    // every minute).
    std::optional<std::string> notice;
  };

  explicit ElasticPlanner(Settings settings) : settings_(settings) {}

  void Started(const std::string& id, const std::string& host, Clock::time_point now);
  // `arrival`: the worker's count of arrivals (1 at its first init()).
  void Arrived(const std::string& id, int64_t arrival, Clock::time_point now);
  void Ended(const std::string& id, Clock::time_point now);

  // What to do now; call after events, and at NextDeadline() without one.
  Decision Decide(Clock::time_point now);
  // When a timeout would change Decide's answer (max(): none pending).
  Clock::time_point NextDeadline() const;

  int64_t generation() const { return generation_; }
  // Whether worker `id` was placed in a generation (false: never joined).
  bool WasMember(const std::string& id) const {
    auto it = workers_.find(id);
    return it != workers_.end() && it->second.rank >= 0;
  }
  int live() const;
  // Worker `id`'s last generation and its rank there (nullopt: it has had
  // none).
  std::optional<std::pair<int64_t, int>> LastPlace(const std::string& id) const {
    auto it = workers_.find(id);
    if (it == workers_.end() || it->second.rank < 0) return std::nullopt;
    return std::make_pair(it->second.generation, it->second.rank);
  }
  // Whether worker `id` is a member of the latest generation.
  bool InLatestGeneration(const std::string& id) const {
    auto it = workers_.find(id);
    return it != workers_.end() && generation_ > 0 && it->second.generation == generation_;
  }
  // While a round waits (some live worker has arrived for a new world): the
  // live workers it waits for.
  std::vector<std::string> Late() const;
  // Where each worker would be placed (and the world's size: the map's)
  // if `newcomers` (id, host) started now, after every live worker, and
  // all of them came to init(): what horarun exports to a worker it
  // starts (HOROVOD_RANK, HOROVOD_LOCAL_RANK, ...), as Horovod's elastic
  // driver does at spawn. The world formed later may differ (a worker
  // that fails first, one more host).
  std::map<std::string, Placement> Prospect(
      const std::vector<std::pair<std::string, std::string>>& newcomers,
      Clock::time_point now) const;
  bool ended() const { return ended_; }

 private:
  struct Worker {
    std::string host;
    int64_t started = 0;     // order of Started calls
    int rank = -1;           // in its last generation (-1: none yet)
    int64_t generation = 0;  // its last generation (0: none yet)
    int64_t arrived = 0;     // arrivals seen
    int64_t consumed = 0;    // the arrival its last generation answered
    bool live = true;
  };
  bool Waiting(const Worker& w) const { return w.live && w.arrived > w.consumed; }
  // Notes when the live count fell below min_np (or rose again).
  void CountChanged(Clock::time_point now);
  // Below min_np, since when the job has waited for workers (what
  // --elastic-timeout bounds): from the first worker come to init() for a
  // new world, not while the members train on (workers of a host the
  // discovery script removed leave at the next commit; the others train
  // with them until then); at once where no worker is live.
  std::optional<Clock::time_point> WaitingSince() const;
  Decision Form(std::vector<std::string> members);

  const Settings settings_;
  std::optional<Clock::time_point> noticed_at_;  // the last notice, while below min_np
  std::map<std::string, Worker> workers_;
  std::map<std::string, int64_t> host_seen_;  // host -> order first seen
  int64_t started_ = 0;
  int64_t generation_ = 0;
  bool ended_ = false;
  std::optional<Clock::time_point> round_since_;  // the first arrival still unanswered
  std::optional<Clock::time_point> below_since_;  // fewer than min_np live since
};

}  // namespace hora::horarun
