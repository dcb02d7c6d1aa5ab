// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "elastic_planner.h"

#include <algorithm>

namespace hora::horarun {
namespace {

// How often a job below min_np says what it waits for.
constexpr std::chrono::seconds kNoticeEvery{60};

std::string SecondsText(ElasticPlanner::Clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s";
}

}  // namespace

void ElasticPlanner::Started(const std::string& id, const std::string& host,
                             Clock::time_point now) {
  Worker w;
  w.host = host;
  w.started = started_++;
  workers_[id] = w;
  host_seen_.emplace(host, static_cast<int64_t>(host_seen_.size()));
  CountChanged(now);
}

void ElasticPlanner::Arrived(const std::string& id, int64_t arrival, Clock::time_point now) {
  auto it = workers_.find(id);
  if (it == workers_.end() || !it->second.live) return;
  Worker& w = it->second;
  w.arrived = std::max(w.arrived, arrival);
  // A round's clock starts at the first arrival that asks for a new world:
  // a member of the last one (a reset), or anyone before the first world.
  // A new worker alone does not start it: the members are training, and
  // come at their next commit (told of the new host), so they are not late.
  if (Waiting(w) && !round_since_ && (w.rank >= 0 || generation_ == 0)) round_since_ = now;
}

void ElasticPlanner::Ended(const std::string& id, Clock::time_point now) {
  auto it = workers_.find(id);
  if (it == workers_.end() || !it->second.live) return;
  it->second.live = false;
  CountChanged(now);
}

std::map<std::string, Placement> ElasticPlanner::Prospect(
    const std::vector<std::pair<std::string, std::string>>& newcomers,
    Clock::time_point now) const {
  ElasticPlanner next = *this;  // (Form's own order, on a copy)
  for (const auto& [id, host] : newcomers) next.Started(id, host, now);
  std::vector<std::string> members;
  for (const auto& [id, w] : next.workers_) {
    if (w.live) members.push_back(id);
  }
  std::map<std::string, Placement> out;
  for (const Assignment& a : next.Form(std::move(members)).assign) out[a.id] = a.placement;
  return out;
}

int ElasticPlanner::live() const {
  int n = 0;
  for (const auto& [id, w] : workers_) n += w.live ? 1 : 0;
  return n;
}

std::vector<std::string> ElasticPlanner::Late() const {
  std::vector<std::string> late;
  if (!round_since_) return late;
  for (const auto& [id, w] : workers_) {
    if (w.live && !Waiting(w)) late.push_back(id);
  }
  return late;
}

void ElasticPlanner::CountChanged(Clock::time_point now) {
  if (live() < settings_.min_np) {
    if (!below_since_) below_since_ = now;
  } else {
    below_since_.reset();
  }
}

std::optional<ElasticPlanner::Clock::time_point> ElasticPlanner::WaitingSince() const {
  if (!below_since_) return std::nullopt;
  if (live() == 0) return below_since_;
  if (!round_since_) return std::nullopt;  // (the members train on)
  return std::max(*below_since_, *round_since_);
}

ElasticPlanner::Clock::time_point ElasticPlanner::NextDeadline() const {
  Clock::time_point next = Clock::time_point::max();
  if (ended_) return next;
  const std::optional<Clock::time_point> since = WaitingSince();
  if (since) next = std::min(next, *since + settings_.timeout);
  if (since && noticed_at_) next = std::min(next, *noticed_at_ + kNoticeEvery);
  bool late = false;
  for (const auto& [id, w] : workers_) late = late || (w.live && !Waiting(w));
  if (round_since_ && late) next = std::min(next, *round_since_ + settings_.timeout);
  return next;
}

ElasticPlanner::Decision ElasticPlanner::Decide(Clock::time_point now) {
  Decision d;
  if (ended_) return d;
  if (below_since_ && !settings_.can_grow) {
    ended_ = true;
    d.end = "only " + std::to_string(live()) + " worker(s) left, fewer than --min-np " +
            std::to_string(settings_.min_np) +
            ", and no new worker can come (no --host-discovery-script)";
    return d;
  }
  const std::optional<Clock::time_point> since = WaitingSince();
  if (since && now - *since >= settings_.timeout) {
    ended_ = true;
    d.end = "only " + std::to_string(live()) + " worker(s) left, fewer than --min-np " +
            std::to_string(settings_.min_np) + ", for " + SecondsText(now - *since) +
            " (--elastic-timeout " + SecondsText(settings_.timeout) + ")";
    return d;
  }
  if (!since) {
    noticed_at_.reset();
  } else if (!noticed_at_ || now - *noticed_at_ >= kNoticeEvery) {
    noticed_at_ = now;
    d.notice = "waiting for workers: " + std::to_string(live()) + " of --min-np " +
               std::to_string(settings_.min_np) + ", up to " +
               SecondsText(settings_.timeout - (now - *since)) + " more (--elastic-timeout)";
  }
  std::vector<std::string> waiting, late;
  for (const auto& [id, w] : workers_) {
    if (w.live) (Waiting(w) ? waiting : late).push_back(id);
  }
  if (waiting.empty()) {
    round_since_.reset();
    return d;
  }
  if (!late.empty()) {
    if (!round_since_ || now - *round_since_ < settings_.timeout) return d;
    // They did not come while the others waited the whole timeout.
    for (const std::string& id : late) {
      workers_[id].live = false;
      d.stop.push_back(id);
    }
    CountChanged(now);
    // (Too few since the round began: the waiting workers have waited that
    // long already.)
    if (below_since_ && *round_since_ < *below_since_) below_since_ = round_since_;
  }
  if (static_cast<int>(waiting.size()) < settings_.min_np) return d;  // (more may come)
  if (settings_.reset_limit && generation_ >= 1 && generation_ > *settings_.reset_limit) {
    ended_ = true;
    d.end = "another reset would be more than --reset-limit " +
            std::to_string(*settings_.reset_limit) + " (" + std::to_string(generation_ - 1) +
            " so far)";
    return d;
  }
  Decision formed = Form(std::move(waiting));
  formed.stop.insert(formed.stop.begin(), d.stop.begin(), d.stop.end());
  return formed;
}

ElasticPlanner::Decision ElasticPlanner::Form(std::vector<std::string> members) {
  Decision d;
  // Survivors by their rank, then new workers as they started.
  auto before = [&](const std::string& a, const std::string& b) {
    const Worker& x = workers_[a];
    const Worker& y = workers_[b];
    if ((x.rank >= 0) != (y.rank >= 0)) return x.rank >= 0;
    return x.rank >= 0 ? x.rank < y.rank : x.started < y.started;
  };
  std::sort(members.begin(), members.end(), before);
  while (static_cast<int>(members.size()) > settings_.max_np) {
    workers_[members.back()].live = false;
    d.stop.push_back(members.back());
    d.surplus.push_back(members.back());
    members.pop_back();
  }
  // Hosts in the order of their first member (a survivor's rank, or the
  // order first seen when none has one), members grouped by host.
  std::vector<std::string> hosts;
  for (const std::string& id : members) {
    const std::string& h = workers_[id].host;
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  }
  auto has_survivor = [&](const std::string& h) {
    return std::any_of(members.begin(), members.end(), [&](const std::string& id) {
      return workers_[id].host == h && workers_[id].rank >= 0;
    });
  };
  std::stable_sort(hosts.begin(), hosts.end(), [&](const std::string& a, const std::string& b) {
    const bool sa = has_survivor(a), sb = has_survivor(b);
    if (sa != sb) return sa;
    return sa ? false : host_seen_[a] < host_seen_[b];  // (survivors' hosts keep rank order)
  });
  std::vector<HostSlots> slots;
  std::vector<std::string> ordered;
  for (const std::string& h : hosts) {
    int n = 0;
    for (const std::string& id : members) {
      if (workers_[id].host == h) {
        ordered.push_back(id);
        ++n;
      }
    }
    slots.push_back({h, n});
  }
  Result<std::vector<Placement>> placed = PlaceRanks(static_cast<int>(ordered.size()), slots);
  if (!placed.ok()) {  // (cannot happen: one slot per member)
    ended_ = true;
    d.end = "placing a generation failed: " + placed.status().ToString();
    return d;
  }
  d.generation = ++generation_;
  for (size_t i = 0; i < ordered.size(); ++i) {
    Worker& w = workers_[ordered[i]];
    w.rank = (*placed)[i].rank;
    w.generation = d.generation;
    w.consumed = w.arrived;
    d.assign.push_back({ordered[i], w.arrived, (*placed)[i]});
  }
  round_since_.reset();
  return d;
}

}  // namespace hora::horarun
