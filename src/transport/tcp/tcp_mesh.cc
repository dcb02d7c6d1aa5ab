// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/tcp/tcp_mesh.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "net/auth.h"
#include "net/congestion.h"

namespace hora {
namespace {

std::string AddressOf(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

std::string WithPort(const std::string& ip, uint16_t port) {
  return (ip.find(':') != std::string::npos ? "[" + ip + "]" : ip) + ":" + std::to_string(port);
}

// net::Connect until `deadline`, in slices between which `store` is asked
// whether the world this mesh is for was abandoned (Store::Abandoned): a
// lower rank that ended after it gave its address refuses every try.
Result<net::Fd> ConnectUnlessAbandoned(Store& store, const net::HostPort& hp, TimePoint deadline) {
  constexpr Duration kSlice = std::chrono::milliseconds(250);
  for (;;) {
    const TimePoint now = Clock::now();
    const TimePoint until = std::min(deadline, now + kSlice);
    Result<net::Fd> fd = net::Connect(hp, until - now);
    if (fd.ok() || until >= deadline || fd.status().code() != StatusCode::kUnavailable) return fd;
    HORA_RETURN_IF_ERROR(store.Abandoned());
  }
}

// Gives each connection to another host the congestion control the options
// name, and says at debug level how many connections read back which.
Status UseCongestionBetweenHosts(const TcpMeshOptions& o, const std::vector<net::Fd>& peers) {
  int between = 0;
  std::set<std::string> read_back;
  for (size_t peer = 0; peer < peers.size(); ++peer) {
    if (!peers[peer].valid() || net::StreamWithinHost(peers[peer].get())) continue;
    HORA_RETURN_IF_ERROR(net::SetCongestionControl(peers[peer].get(), o.congestion)
                             .WithContext("rank " + std::to_string(o.rank) +
                                          "'s connection to rank " + std::to_string(peer)));
    read_back.insert(net::CongestionControlOf(peers[peer].get()));
    ++between;
  }
  if (o.logger != nullptr && o.logger->Enabled(LogLevel::kDebug)) {
    std::string names;
    for (const std::string& n : read_back) names += (names.empty() ? "" : ", ") + n;
    o.logger->Debug("rank " + std::to_string(o.rank) + ": " + std::to_string(between) +
                    " connections to other hosts use " + (names.empty() ? "no" : names) +
                    " congestion control (read back)");
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> AdvertisedAddress(const std::string& iface) {
  in6_addr probe6;
  in_addr probe4;
  if (!iface.empty() && (inet_pton(AF_INET, iface.c_str(), &probe4) == 1 ||
                         inet_pton(AF_INET6, iface.c_str(), &probe6) == 1)) {
    return iface;  // an address given directly
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0)
    return UnavailableError(std::string("getifaddrs: ") + std::strerror(errno));
  std::string found, loopback;
  std::vector<std::string> names;  // the interfaces that have an address (for the error)
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || !(i->ifa_flags & IFF_UP)) continue;
    if (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6) continue;
    if (i->ifa_addr->sa_family == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr)) {
      continue;  // link-local addresses need a scope id: skip them
    }
    if (std::find(names.begin(), names.end(), i->ifa_name) == names.end()) {
      names.emplace_back(i->ifa_name);
    }
    if (!iface.empty() && iface != i->ifa_name) continue;
    const std::string addr = AddressOf(i->ifa_addr);
    if (i->ifa_flags & IFF_LOOPBACK) {
      if (loopback.empty() || i->ifa_addr->sa_family == AF_INET) loopback = addr;
    } else if (found.empty() ||
               (i->ifa_addr->sa_family == AF_INET && found.find(':') != std::string::npos)) {
      found = addr;  // prefer IPv4
    }
  }
  freeifaddrs(list);
  if (!found.empty()) return found;
  if (!loopback.empty()) return loopback;
  std::string have;
  for (const std::string& n : names) have += (have.empty() ? "" : ", ") + n;
  return InvalidArgument("HORA_IFACE='" + iface + "': no such interface with an address (" +
                         (have.empty() ? "this host has none" : "this host has " + have) + ")");
}

Result<std::vector<net::Fd>> ConnectTcpMesh(Store& store, const TcpMeshOptions& o) {
  const TimePoint deadline = DeadlineAfter(Clock::now(), o.timeout);
  std::vector<net::Fd> peers(static_cast<size_t>(o.size));
  if (o.size == 1) return peers;
  // (ConnectProcess checked it already, with the other ranks; this is for
  // the mesh's other callers, before any rank waits on this one.)
  if (!o.congestion.empty()) HORA_RETURN_IF_ERROR(net::CheckCongestionControl(o.congestion));
  HORA_ASSIGN_OR_RETURN(std::string ip, AdvertisedAddress(o.iface));
  HORA_ASSIGN_OR_RETURN(net::Fd listener, net::Listen(ip, 0, std::max(o.size, 128)));
  HORA_ASSIGN_OR_RETURN(uint16_t port, net::LocalPort(listener));
  const std::string me = WithPort(ip, port);
  HORA_RETURN_IF_ERROR(
      store.Set(o.key_prefix + "/addr/" + std::to_string(o.rank), Bytes(me.begin(), me.end())));

  // Connect to every lower rank.
  for (int peer = 0; peer < o.rank; ++peer) {
    const std::string key = o.key_prefix + "/addr/" + std::to_string(peer);
    HORA_ASSIGN_OR_RETURN(Bytes addr_bytes, store.Get(key, deadline - Clock::now()));
    const std::string addr(addr_bytes.begin(), addr_bytes.end());
    HORA_ASSIGN_OR_RETURN(net::HostPort hp, net::ParseHostPort(addr));
    HORA_ASSIGN_OR_RETURN(net::Fd fd, ConnectUnlessAbandoned(store, hp, deadline));
    HORA_RETURN_IF_ERROR(net::AuthenticateAsClient(fd.get(), o.secret, deadline)
                             .WithContext("rank " + std::to_string(o.rank) +
                                          " connecting to rank " + std::to_string(peer) + " at " +
                                          addr));
    const int32_t my_rank = o.rank;
    HORA_RETURN_IF_ERROR(net::SendAll(fd.get(), &my_rank, sizeof my_rank, deadline));
    peers[static_cast<size_t>(peer)] = std::move(fd);
  }
  // Accept every higher rank.
  HORA_RETURN_IF_ERROR(AcceptHigherRanks(store, listener, o, deadline, &peers));
  if (!o.congestion.empty()) HORA_RETURN_IF_ERROR(UseCongestionBetweenHosts(o, peers));
  return peers;
}

}  // namespace hora
