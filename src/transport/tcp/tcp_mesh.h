// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Establishes the full mesh of TCP connections of one group: every rank
// listens, publishes "ip:port" in the Store, connects to every lower rank and
// accepts every higher one. Each connection is authenticated (HMAC over the
// job secret, net/auth.h) and then names its rank. Bounded by `timeout`.
// The accepting side runs every incoming handshake at once, each within
// 10 s: a stranger's connection that stays silent, or fails to
// authenticate, is closed and logged (a few per 10 s, then a count)
// without holding up the ranks' own.
#pragma once

#include <string>
#include <vector>

#include "common/clock.h"
#include "common/logging.h"
#include "net/socket.h"
#include "store/store.h"

namespace hora {

struct TcpMeshOptions {
  int rank = 0;
  int size = 1;
  std::string key_prefix;  // store keys: <prefix>/addr/<rank>
  std::string secret;
  std::string iface;  // interface name or IP address to advertise; "" = first non-loopback
  Duration timeout = std::chrono::seconds(30);
  // How long a waiter on a small message moves the sockets itself after the
  // last byte moved, before it sleeps (Config::wait_spin_us).
  Duration wait_spin = std::chrono::microseconds(50);
  // The ranks on this host outnumber its cores: a waiter yields the core
  // between its looks at the socket, and polls 200 us at least
  // (kOversubscribedSpin; see TcpTransport::Wait).
  bool yield = false;
  // The transport's liveness (tcp_transport.h): a peer from which nothing,
  // not even a heartbeat, came for this long is lost (zero: never).
  Duration peer_timeout{};
  // The congestion control of the connections to other hosts (HORA_TCP_CONGESTION;
  // "": the system's). Connections within the host keep Reno (net::WithinHost).
  std::string congestion{};
  // Where a refused connection (failed authentication) is reported, at
  // warning level, while the mesh connects; nullptr: nowhere.
  const Logger* logger = nullptr;
};

// Returns one connected, authenticated socket per peer (index = rank; the
// entry for this rank is invalid).
Result<std::vector<net::Fd>> ConnectTcpMesh(Store& store, const TcpMeshOptions& options);

// ConnectTcpMesh's accepting half (tcp_mesh_accept.cc): fills the entries
// of `peers` above this rank from connections to `listener`; ends early
// with `store`'s Abandoned() error.
Status AcceptHigherRanks(Store& store, const net::Fd& listener, const TcpMeshOptions& options,
                         TimePoint deadline, std::vector<net::Fd>* peers);

// The address this host advertises for `iface` (see TcpMeshOptions).
Result<std::string> AdvertisedAddress(const std::string& iface);

}  // namespace hora
