// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "launch/slurm.h"

#include <cstdlib>

namespace hora {
namespace {

bool AllDigits(const std::string& s) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// The values of one bracket's contents ("01-03,07"), as text.
Result<std::vector<std::string>> ExpandBracket(const std::string& inside, const std::string& where,
                                               size_t max_values) {
  std::vector<std::string> values;
  size_t pos = 0;
  while (pos <= inside.size()) {
    size_t comma = inside.find(',', pos);
    if (comma == std::string::npos) comma = inside.size();
    const std::string part = inside.substr(pos, comma - pos);
    const size_t dash = part.find('-');
    const std::string lo = part.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : part.substr(dash + 1);
    if (!AllDigits(lo) || !AllDigits(hi)) {
      return InvalidArgument(where + ": '" + part + "' is not a number or a range like 01-04");
    }
    const long long a = std::strtoll(lo.c_str(), nullptr, 10);
    const long long b = std::strtoll(hi.c_str(), nullptr, 10);
    if (b < a) return InvalidArgument(where + ": range '" + part + "' goes down");
    if (static_cast<unsigned long long>(b - a) >= max_values - values.size()) {
      return InvalidArgument(where + " has more than " + std::to_string(max_values) + " hosts");
    }
    for (long long v = a; v <= b; ++v) {
      std::string digits = std::to_string(v);
      if (digits.size() < lo.size()) digits.insert(0, lo.size() - digits.size(), '0');
      values.push_back(std::move(digits));
    }
    pos = comma + 1;
  }
  return values;
}

// Appends every host of one entry ("r[1-2]n[01-02]") to `out`.
Status ExpandEntry(const std::string& entry, const std::string& where, size_t max_hosts,
                   std::vector<std::string>* out) {
  std::vector<std::string> hosts{""};
  size_t pos = 0;
  while (pos < entry.size()) {
    const size_t open = entry.find('[', pos);
    const std::string text = entry.substr(pos, open - pos);
    if (text.find(']') != std::string::npos) {
      return InvalidArgument(where + ": ']' without '[' in '" + entry + "'");
    }
    for (std::string& h : hosts) h += text;
    if (open == std::string::npos) break;
    const size_t close = entry.find(']', open);
    if (close == std::string::npos)
      return InvalidArgument(where + ": unclosed '[' in '" + entry + "'");
    HORA_ASSIGN_OR_RETURN(
        std::vector<std::string> values,
        ExpandBracket(entry.substr(open + 1, close - open - 1), where, max_hosts));
    if (hosts.size() * values.size() > max_hosts - out->size()) {
      return InvalidArgument(where + " has more than " + std::to_string(max_hosts) + " hosts");
    }
    std::vector<std::string> next;
    next.reserve(hosts.size() * values.size());
    for (const std::string& h : hosts)
      for (const std::string& v : values) next.push_back(h + v);
    hosts = std::move(next);
    pos = close + 1;
  }
  if (hosts.front().empty()) return InvalidArgument(where + ": an empty host name");
  out->insert(out->end(), hosts.begin(), hosts.end());
  return Status::Ok();
}

// The entries of a host list: split at commas outside brackets.
Result<std::vector<std::string>> Entries(const std::string& hostlist, const std::string& where) {
  std::vector<std::string> entries;
  std::string current;
  int depth = 0;
  for (char c : hostlist) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) return InvalidArgument(where + ": unbalanced brackets");
    if (c == ',' && depth == 0) {
      entries.push_back(std::move(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (depth != 0) return InvalidArgument(where + ": unclosed '['");
  entries.push_back(std::move(current));
  for (const std::string& e : entries) {
    if (e.empty()) return InvalidArgument(where + ": an empty entry");
  }
  return entries;
}

}  // namespace

Result<std::vector<std::string>> ExpandSlurmHostlist(const std::string& hostlist,
                                                     size_t max_hosts) {
  const std::string where = "Slurm host list '" + hostlist + "'";
  HORA_ASSIGN_OR_RETURN(std::vector<std::string> entries, Entries(hostlist, where));
  std::vector<std::string> hosts;
  for (const std::string& e : entries)
    HORA_RETURN_IF_ERROR(ExpandEntry(e, where, max_hosts, &hosts));
  return hosts;
}

Result<std::string> FirstSlurmHost(const std::string& hostlist) {
  const std::string where = "Slurm host list '" + hostlist + "'";
  HORA_ASSIGN_OR_RETURN(std::vector<std::string> entries, Entries(hostlist, where));
  std::vector<std::string> hosts;
  // The first entry alone, still checked whole (a bracket's values are few).
  HORA_RETURN_IF_ERROR(ExpandEntry(entries.front(), where, 1000000, &hosts));
  return hosts.front();
}

Result<uint16_t> SlurmStorePort(const std::string& job_id, const std::string& step_id) {
  if (!AllDigits(job_id)) {
    return InvalidArgument("SLURM_JOB_ID='" + job_id + "' is not a job number");
  }
  if (!AllDigits(step_id)) {
    return InvalidArgument("SLURM_STEP_ID='" + step_id + "' is not a step number");
  }
  const uint64_t n = kSlurmStorePortCount;
  const auto mod_n = [n](const std::string& digits) {  // any length, no overflow
    uint64_t r = 0;
    for (char c : digits) r = (r * 10 + static_cast<uint64_t>(c - '0')) % n;
    return r;
  };
  const uint64_t k = kSlurmStorePortStride;
  const uint64_t index = k * ((mod_n(job_id) + k * mod_n(step_id)) % n) % n;
  return static_cast<uint16_t>(kSlurmStorePortBase + index);
}

}  // namespace hora
