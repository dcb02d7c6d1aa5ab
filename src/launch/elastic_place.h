// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Where an elastic job's worker learns its place in each generation
// (docs/dev/elastic.md): the store keys horarun and the workers share, and
// the text of an assignment. A worker's n-th init() adds 1 to its arrival
// key and waits for its assignment key for n, whose value is
// "<generation> <rank> <size> <local_rank> <local_size> <cross_rank>
// <cross_size> [<hosts_added> <hosts_removed>]", or "end <why>" when the
// job ends instead.
#pragma once

#include <cstdint>
#include <string>

#include "hora/status.h"
#include "launch/rank_layout.h"

namespace hora {

struct ElasticPlace {
  int64_t generation = 0;
  RankLayout layout;
  // The host-update counters (ElasticHostsAddedKey, ElasticHostsRemovedKey)
  // as horarun formed this world: its members reset for later updates
  // only. -1: not said (the worker reads them before it arrives).
  int64_t hosts_added = -1, hosts_removed = -1;
};

std::string ElasticArrivalKey(const std::string& job, const std::string& worker);
// Every worker's arrivals together: a worker adds 1 there after its own
// key, so that horarun reads the workers' keys only when it moved.
std::string ElasticArrivalsKey(const std::string& job);
std::string ElasticAssignmentKey(const std::string& job, const std::string& worker,
                                 int64_t arrival);

// Counters horarun adds 1 to each time its host discovery reports hosts (or
// slots) added, or removed; Session::ElasticHostUpdates reads them.
// Set by horarun when a member of generation `generation` ends (its value
// says which): the others stop waiting for it if their world is still
// connecting, and form the next one (api/abortable_store.h).
std::string ElasticBrokenKey(const std::string& job, int64_t generation);
// Set by a member of generation `generation` whose transport found the
// member of rank `rank` silent (no heartbeat for HORA_PEER_TIMEOUT_S:
// stopped or frozen; its value says so): horarun stops that worker if it
// does not come back to init(), also on a host whose processes it cannot
// see.
std::string ElasticSilentKey(const std::string& job, int64_t generation, int rank);
std::string ElasticHostsAddedKey(const std::string& job);
std::string ElasticHostsRemovedKey(const std::string& job);

std::string FormatElasticPlace(const ElasticPlace& place);
std::string FormatElasticEnd(const std::string& why);
// An assignment's text: the place; for an end, an Aborted error with the
// why; malformed text, an InvalidArgument naming it.
Result<ElasticPlace> ParseElasticAssignment(const std::string& text);

}  // namespace hora
