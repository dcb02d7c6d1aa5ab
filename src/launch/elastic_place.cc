// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "launch/elastic_place.h"

#include <sstream>

namespace hora {

std::string ElasticArrivalKey(const std::string& job, const std::string& worker) {
  return "hora/" + job + "/elastic/arrive/" + worker;
}

std::string ElasticBrokenKey(const std::string& job, int64_t generation) {
  return "hora/" + job + "/elastic/broken/" + std::to_string(generation);
}

std::string ElasticSilentKey(const std::string& job, int64_t generation, int rank) {
  return "hora/" + job + "/elastic/silent/" + std::to_string(generation) + "/" +
         std::to_string(rank);
}

std::string ElasticArrivalsKey(const std::string& job) {
  return "hora/" + job + "/elastic/arrivals";
}

std::string ElasticAssignmentKey(const std::string& job, const std::string& worker,
                                 int64_t arrival) {
  return "hora/" + job + "/elastic/assign/" + worker + "/" + std::to_string(arrival);
}

std::string ElasticHostsAddedKey(const std::string& job) {
  return "hora/" + job + "/elastic/hosts_added";
}

std::string ElasticHostsRemovedKey(const std::string& job) {
  return "hora/" + job + "/elastic/hosts_removed";
}

std::string FormatElasticPlace(const ElasticPlace& p) {
  const RankLayout& l = p.layout;
  std::ostringstream out;
  out << p.generation << ' ' << l.rank << ' ' << l.size << ' ' << l.local_rank << ' '
      << l.local_size << ' ' << l.cross_rank << ' ' << l.cross_size;
  if (p.hosts_added >= 0 && p.hosts_removed >= 0) {
    out << ' ' << p.hosts_added << ' ' << p.hosts_removed;
  }
  return out.str();
}

std::string FormatElasticEnd(const std::string& why) { return "end " + why; }

Result<ElasticPlace> ParseElasticAssignment(const std::string& text) {
  if (text.rfind("end ", 0) == 0) return AbortedError(text.substr(4));
  std::istringstream in(text);
  ElasticPlace p;
  RankLayout& l = p.layout;
  std::string rest;
  bool counts_ok = true;
  const bool read = static_cast<bool>(in >> p.generation >> l.rank >> l.size >> l.local_rank >>
                                      l.local_size >> l.cross_rank >> l.cross_size);
  if (read && !(in >> std::ws).eof()) {
    // (The host-update counts, both or neither.)
    counts_ok = static_cast<bool>(in >> p.hosts_added >> p.hosts_removed) && p.hosts_added >= 0 &&
                p.hosts_removed >= 0;
  }
  if (!read || !counts_ok || (in >> rest) || p.generation < 1 || l.size < 1 || l.rank < 0 ||
      l.rank >= l.size || l.local_size < 1 || l.local_rank < 0 || l.local_rank >= l.local_size ||
      l.cross_size < 1 || l.cross_rank < 0 || l.cross_rank >= l.cross_size) {
    return InvalidArgument("an elastic assignment that is not one: '" + text + "'");
  }
  l.source = "horarun (elastic)";
  return p;
}

}  // namespace hora
