// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "api/settings_agreement.h"

#include <algorithm>
#include <chrono>
#include <cstddef>

#include "api/process_set_state.h"

namespace hora {
namespace {

// name NUL value NUL, for each setting (an environment value holds no NUL).
Bytes Encode(const NamedValues& values) {
  Bytes out;
  for (const auto& [name, value] : values) {
    for (const std::string* s : {&name, &value}) {
      out.insert(out.end(), s->begin(), s->end());
      out.push_back(0);
    }
  }
  return out;
}

NamedValues Decode(const Bytes& bytes) {
  std::vector<std::string> parts(1);
  for (uint8_t b : bytes) {
    if (b == 0) {
      parts.emplace_back();
    } else {
      parts.back().push_back(static_cast<char>(b));
    }
  }
  NamedValues out;
  for (size_t i = 0; i + 1 < parts.size(); i += 2) {
    out.emplace_back(parts[i], parts[i + 1]);
  }
  return out;
}

Bytes Text(const std::string& s) { return Bytes(s.begin(), s.end()); }

std::string Ranks(const std::vector<int>& ranks) {
  return (ranks.size() > 1 ? "ranks " : "rank ") + RankListText(ranks);
}

}  // namespace

std::string SettingsDisagreement(const std::vector<NamedValues>& by_rank) {
  if (by_rank.empty()) return "";
  std::string out;
  const NamedValues& first = by_rank[0];
  for (size_t i = 0; i < first.size(); ++i) {
    const std::string& name = first[i].first;
    // value -> ranks, in the order the values first appear
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    for (size_t r = 0; r < by_rank.size(); ++r) {
      std::string value = "(not given)";
      for (const auto& [n, v] : by_rank[r]) {
        if (n == name) value = v;
      }
      auto it = groups.begin();
      while (it != groups.end() && it->first != value) ++it;
      if (it == groups.end()) {
        groups.push_back({value, {}});
        it = groups.end() - 1;
      }
      it->second.push_back(static_cast<int>(r));
    }
    if (groups.size() < 2) continue;
    out += (out.empty() ? "" : "; ") + name + " is ";
    for (size_t g = 0; g < groups.size(); ++g) {
      out += (g == 0 ? "" : g + 1 == groups.size() ? " and " : ", ");
      out += "'" + groups[g].first + "' on " + Ranks(groups[g].second);
    }
  }
  return out;
}

namespace {

std::string Disagreement(const std::string& differ) {
  // (Entries named "... on this host" are facts of the host, not settings.)
  const bool host = differ.find(" on this host is ") != std::string::npos;
  return "ranks disagree on settings every rank must share: " + differ +
         (host ? " (give every rank the same environment, and every host what it needs)"
               : " (give every rank the same environment)");
}

}  // namespace

Status CompareSettingsOver(CollectiveBackend& backend, int rank, int size,
                           const NamedValues& mine) {
  const Bytes encoded = Encode(mine);
  const int64_t n = static_cast<int64_t>(encoded.size());
  std::vector<int64_t> lengths(static_cast<size_t>(size));
  const std::vector<size_t> eight(static_cast<size_t>(size), sizeof(int64_t));
  const std::string where =
      "rank " + std::to_string(rank) + ": comparing the settings every rank must share";
  HORA_RETURN_IF_ERROR(backend.Allgatherv(&n, lengths.data(), eight).WithContext(where));
  std::vector<size_t> bytes(lengths.begin(), lengths.end());
  size_t total = 0;
  for (size_t b : bytes) total += b;
  Bytes all(total);
  HORA_RETURN_IF_ERROR(backend.Allgatherv(encoded.data(), all.data(), bytes).WithContext(where));
  std::vector<NamedValues> by_rank;
  size_t at = 0;
  for (size_t b : bytes) {
    by_rank.push_back(Decode(Bytes(all.begin() + static_cast<ptrdiff_t>(at),
                                   all.begin() + static_cast<ptrdiff_t>(at + b))));
    at += b;
  }
  const std::string differ = SettingsDisagreement(by_rank);
  if (differ.empty()) return Status::Ok();
  return InvalidArgument("rank " + std::to_string(rank) + ": " + Disagreement(differ));
}

namespace {

// Rank 0's verdict in the store: one letter, then the why. 'o' the ranks
// agree; '!' they differ (InvalidArgument); 't' a rank never came
// (Timeout); 'u' a rank's world broke while it formed (Unavailable: an
// elastic worker that ended): the codes a new world mends stay so.
char VerdictLetter(StatusCode code) {
  switch (code) {
    case StatusCode::kTimeout:
      return 't';
    case StatusCode::kUnavailable:
      return 'u';
    default:
      return '!';
  }
}

Status VerdictStatus(char letter, const std::string& why) {
  switch (letter) {
    case 't':
      return TimeoutError(why);
    case 'u':
      return UnavailableError(why);
    default:
      return InvalidArgument(why);
  }
}

}  // namespace

Status CompareSettings(Store& store, const std::string& prefix, int rank, int size,
                       const NamedValues& mine, Duration timeout) {
  const std::string key = prefix + "/settings/";
  const std::string verdict_key = prefix + "/settings";
  if (rank != 0) {
    HORA_RETURN_IF_ERROR(store.Set(key + std::to_string(rank), Encode(mine)));
    // (Rank 0 answers within its timeout, waiting for the last rank to come.)
    Result<Bytes> verdict = store.Get(verdict_key, timeout + std::chrono::seconds(10));
    if (!verdict.ok()) {
      return verdict.status().WithContext("rank " + std::to_string(rank) +
                                          ": comparing the settings every rank must share");
    }
    if (verdict->size() == 2 && verdict->front() == 'o') return Status::Ok();
    if (verdict->empty()) return InternalError("rank " + std::to_string(rank) + ": empty verdict");
    return VerdictStatus(
        static_cast<char>(verdict->front()),
        "rank " + std::to_string(rank) + ": " +
            std::string(reinterpret_cast<const char*>(verdict->data()) + 1, verdict->size() - 1));
  }
  std::vector<NamedValues> all(static_cast<size_t>(size));
  all[0] = mine;
  const TimePoint deadline = Clock::now() + timeout;
  std::string failure;
  StatusCode code = StatusCode::kInvalidArgument;
  for (int r = 1; r < size && failure.empty(); ++r) {
    const Duration left = std::max(Duration::zero(), deadline - Clock::now());
    Result<Bytes> theirs = store.Get(key + std::to_string(r), left);
    if (!theirs.ok()) {
      code = theirs.status().code();
      // (Unavailable: the wait was ended, a rank's end named; else it timed
      // out, and the likeliest cause is a rank set up otherwise.)
      failure = code == StatusCode::kUnavailable
                    ? theirs.status().message()
                    : "rank " + std::to_string(r) +
                          " never came to compare the settings every rank must share (was it "
                          "started, and can it reach the store? is it set up for another "
                          "transport, HORA_TRANSPORT=mpi, or backend?): " +
                          theirs.status().message();
      break;
    }
    all[static_cast<size_t>(r)] = Decode(*theirs);
  }
  if (failure.empty()) {
    const std::string differ = SettingsDisagreement(all);
    if (!differ.empty()) failure = Disagreement(differ);
  }
  const char letter = VerdictLetter(code);
  HORA_RETURN_IF_ERROR(store.Set(
      verdict_key, failure.empty() ? Text("ok") : Text(std::string(1, letter) + failure)));
  if (failure.empty()) return Status::Ok();
  return VerdictStatus(letter, "rank 0: " + failure);
}

}  // namespace hora
