// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "hosts.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

namespace hora::horarun {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

Result<int> ParseSlots(std::string_view text, const std::string& where) {
  if (text.empty() || text.size() > 6) {
    return InvalidArgument(where + ": slot count '" + std::string(text) + "' is not a number");
  }
  int v = 0;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      return InvalidArgument(where + ": slot count '" + std::string(text) + "' is not a number");
    }
    v = v * 10 + (c - '0');
  }
  if (v < 1)
    return InvalidArgument(where + ": slot count must be at least 1 (got " + std::string(text) +
                           ")");
  return v;
}

Status CheckHostName(std::string_view host, const std::string& where) {
  if (host.empty()) return InvalidArgument(where + ": empty host name");
  if (host.front() == '-') {  // would reach ssh as an option
    return InvalidArgument(where + ": host name '" + std::string(host) + "' starts with '-'");
  }
  for (char c : host) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) {
      return InvalidArgument(where + ": host name '" + std::string(host) + "' contains '" +
                             std::string(1, c) + "'");
    }
  }
  return Status::Ok();
}

// An IPv6 address as written inside brackets: "::1", "fe80::1%eth0" (a
// zone is an interface name: letters, digits, '.', '-', '_').
Status CheckIpv6(std::string_view text, const std::string& where) {
  const size_t percent = text.find('%');
  std::string address(text.substr(0, percent));
  in6_addr parsed;
  bool ok = !address.empty() && inet_pton(AF_INET6, address.c_str(), &parsed) == 1;
  if (ok && percent != std::string_view::npos) {
    const std::string_view zone = text.substr(percent + 1);
    ok = !zone.empty();
    for (char c : zone) {
      ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_');
    }
  }
  if (!ok) {
    return InvalidArgument(where + ": '[" + std::string(text) + "]' is not an IPv6 address");
  }
  return Status::Ok();
}

// A host without its slots: a name, an IPv4 address, "[IPv6]", or (where no
// ":N" can follow, allow_bare_ipv6) an IPv6 address without brackets.
Result<std::string> ParseHost(std::string_view host, const std::string& where,
                              bool allow_bare_ipv6) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    HORA_RETURN_IF_ERROR(CheckIpv6(host, where));
    return std::string(host);
  }
  if (host.find(':') != std::string_view::npos) {
    if (allow_bare_ipv6 && CheckIpv6(host, where).ok()) return std::string(host);
    return InvalidArgument(where + ": host '" + std::string(host) +
                           "': an IPv6 address goes in brackets, as in [::1]:2");
  }
  HORA_RETURN_IF_ERROR(CheckHostName(host, where));
  return std::string(host);
}

// "host", "host:N", "[IPv6]" or "[IPv6]:N".
Result<HostSlots> ParseEntry(std::string_view entry, const std::string& where) {
  entry = Trim(entry);
  const size_t bracket = entry.rfind(']');
  size_t colon = entry.rfind(':');
  if (bracket != std::string_view::npos && colon != std::string_view::npos && colon < bracket) {
    colon = std::string_view::npos;  // the colons are the address's
  }
  HostSlots hs;
  std::string_view host = colon == std::string_view::npos ? entry : entry.substr(0, colon);
  HORA_ASSIGN_OR_RETURN(hs.host, ParseHost(host, where, false));
  if (colon != std::string_view::npos) {
    HORA_ASSIGN_OR_RETURN(hs.slots, ParseSlots(entry.substr(colon + 1), where));
  }
  return hs;
}

Status CheckUnique(const std::vector<HostSlots>& hosts, const std::string& where) {
  std::set<std::string> seen;
  for (const auto& h : hosts) {
    if (!seen.insert(h.host).second)
      return InvalidArgument(where + ": host '" + h.host + "' is listed twice");
  }
  if (hosts.empty()) return InvalidArgument(where + ": no hosts given");
  return Status::Ok();
}

}  // namespace

Result<std::vector<HostSlots>> ParseHostList(std::string_view text) {
  std::vector<HostSlots> hosts;
  const std::string where = "-H '" + std::string(text) + "'";
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view item = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    HORA_ASSIGN_OR_RETURN(HostSlots hs, ParseEntry(item, where));
    hosts.push_back(hs);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  HORA_RETURN_IF_ERROR(CheckUnique(hosts, where));
  return hosts;
}

Result<std::vector<HostSlots>> ParseHostfile(std::string_view contents, const std::string& path) {
  std::vector<HostSlots> hosts;
  size_t line_no = 0;
  size_t start = 0;
  while (start < contents.size()) {
    size_t nl = contents.find('\n', start);
    std::string_view line =
        contents.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    start = nl == std::string_view::npos ? contents.size() : nl + 1;
    ++line_no;
    const std::string where = path + ":" + std::to_string(line_no);
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = Trim(line);
    if (line.empty()) continue;
    const size_t space = line.find_first_of(" \t");
    if (space == std::string_view::npos) {
      HORA_ASSIGN_OR_RETURN(HostSlots hs, ParseEntry(line, where));
      hosts.push_back(hs);
      continue;
    }
    HORA_ASSIGN_OR_RETURN(std::string host, ParseHost(line.substr(0, space), where, true));
    // "slots=N", also "slots = N" (horovodrun's reading), and Open MPI's
    // "max_slots=M" beside it (nothing for horarun: it starts -np ranks).
    std::string rest;
    for (char c : Trim(line.substr(space))) rest += c == '\t' ? ' ' : c;
    for (size_t eq; (eq = rest.find(" =")) != std::string::npos;) rest.erase(eq, 1);
    for (size_t eq; (eq = rest.find("= ")) != std::string::npos;) rest.erase(eq + 1, 1);
    std::optional<int> slots, max_slots;
    for (std::string_view fields = rest; !fields.empty();) {
      const size_t end = std::min(fields.find(' '), fields.size());
      const std::string_view field = fields.substr(0, end);
      fields = Trim(fields.substr(end));
      if (field.substr(0, 6) == "slots=" && !slots) {
        HORA_ASSIGN_OR_RETURN(slots, ParseSlots(field.substr(6), where));
      } else if (field.substr(0, 10) == "max_slots=" && !max_slots) {
        HORA_ASSIGN_OR_RETURN(max_slots, ParseSlots(field.substr(10), where));
      } else {
        return InvalidArgument(where +
                               ": expected 'slots=N' after the host (and Open MPI's "
                               "max_slots=M), got '" +
                               rest + "'");
      }
    }
    if (!slots) return InvalidArgument(where + ": no 'slots=N' after the host");
    if (max_slots && *max_slots < *slots) {
      return InvalidArgument(where + ": max_slots=" + std::to_string(*max_slots) +
                             " is below slots=" + std::to_string(*slots));
    }
    hosts.push_back({std::move(host), *slots});
  }
  HORA_RETURN_IF_ERROR(CheckUnique(hosts, path));
  return hosts;
}

Result<std::vector<Placement>> PlaceRanks(int np, const std::vector<HostSlots>& hosts) {
  if (np < 1) return InvalidArgument("-np must be at least 1 (got " + std::to_string(np) + ")");
  long total = 0;
  for (const auto& h : hosts) total += h.slots;
  if (total < np) {
    return InvalidArgument("-np " + std::to_string(np) + " asks for more processes than the " +
                           std::to_string(total) + " slot(s) the hosts provide");
  }
  // Ranks fill hosts in order. Cross rank and size follow Horovod: among the
  // processes with the same local rank, one per host, in host order.
  std::vector<Placement> out;
  int rank = 0;
  std::vector<int> per_host;
  for (const auto& h : hosts) {
    if (rank == np) break;
    const int here = std::min(h.slots, np - rank);
    for (int l = 0; l < here; ++l) out.push_back({rank++, h.host, l, here, 0, 0});
    per_host.push_back(here);
  }
  size_t next = 0;
  for (size_t host = 0; host < per_host.size(); ++host) {
    for (int l = 0; l < per_host[host]; ++l, ++next) {
      int cross_rank = 0, cross_size = 0;
      for (size_t other = 0; other < per_host.size(); ++other) {
        if (per_host[other] > l) {
          if (other < host) ++cross_rank;
          ++cross_size;
        }
      }
      out[next].cross_rank = cross_rank;
      out[next].cross_size = cross_size;
    }
  }
  return out;
}

bool IsLocalHost(const std::string& host) {
  // (Host names are not case-sensitive: LOCALHOST is localhost.)
  const auto same_name = [&host](std::string_view name) {
    return host.size() == name.size() &&
           std::equal(host.begin(), host.end(), name.begin(), [](char a, char b) {
             return std::tolower(static_cast<unsigned char>(a)) ==
                    std::tolower(static_cast<unsigned char>(b));
           });
  };
  if (same_name("localhost") || host == "::1" || host.rfind("127.", 0) == 0) return true;
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0 && same_name(name)) return true;
  return IsLocalAddress(host);
}

bool IsLocalAddress(const std::string& host) {
  // (Numeric only: no name is looked up, which could wait on DNS.)
  in_addr v4{};
  in6_addr v6{};
  const bool is_v4 = inet_pton(AF_INET, host.c_str(), &v4) == 1;
  const bool is_v6 = !is_v4 && inet_pton(AF_INET6, host.c_str(), &v6) == 1;
  if (!is_v4 && !is_v6) return false;
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return false;
  bool local = false;
  for (const ifaddrs* a = all; a != nullptr && !local; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    if (is_v4 && a->ifa_addr->sa_family == AF_INET) {
      local = reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr == v4.s_addr;
    } else if (is_v6 && a->ifa_addr->sa_family == AF_INET6) {
      local = std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a->ifa_addr)->sin6_addr, &v6,
                          sizeof v6) == 0;
    }
  }
  freeifaddrs(all);
  return local;
}

}  // namespace hora::horarun
