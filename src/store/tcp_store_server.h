// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The server of the TCP store (see tcp_store.h). One background thread runs a
// poll() loop over the listening socket and every client, all nonblocking,
// each connection with its own read and write buffers, so no client can stall
// another.
//
// Each new connection must first pass the mutual HMAC handshake (net/auth.h)
// within the handshake timeout; until then nothing it sends is parsed. A
// connection that fails (wrong secret, garbage, silence) is closed and logged
// at warning level: "refused connection from 127.0.0.1:53412: authentication
// failed" (five such lines per 10 s at most, then one line with the count). A malformed message
// from an authenticated client closes that connection (logged); the server goes on serving the
// others. GET and WAIT on missing keys are parked server-side and answered when the keys appear or
// their timeout passes. On shutdown, parked requests are answered with an
// Aborted error and every connection is closed.
//
// Thread-safety: Start, port and the counters may be called from any thread;
// the destructor stops the thread promptly (it wakes the loop through an
// eventfd) and must not race with other calls.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "common/clock.h"
#include "common/logging.h"
#include "hora/status.h"

namespace hora {

struct TcpStoreServerOptions {
  // How long a new connection has to complete the handshake.
  Duration handshake_timeout = std::chrono::seconds(10);
  int backlog = 1024;
};

class TcpStoreServer {
 public:
  // Listens on `bind_host`:`port` ("" = every interface; port 0 = an
  // ephemeral port, see port()) and starts the thread. `secret` is the job
  // secret (not empty). The server logs through its own copy of
  // `logger` (nullopt: no logging).
  static Result<std::unique_ptr<TcpStoreServer>> Start(const std::string& bind_host, uint16_t port,
                                                       std::string_view secret,
                                                       std::optional<Logger> logger,
                                                       TcpStoreServerOptions options = {});
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  // The port the server listens on.
  uint16_t port() const { return port_; }

  // Connections closed because they failed the handshake (or timed out in it).
  uint64_t refused_connections() const { return counters_.refused.load(); }
  // Authenticated connections closed because they sent a malformed message.
  uint64_t malformed_connections() const { return counters_.malformed.load(); }
  // Connections that passed the handshake.
  uint64_t authenticated_connections() const { return counters_.authenticated.load(); }

  struct Counters {
    std::atomic<uint64_t> refused{0};
    std::atomic<uint64_t> malformed{0};
    std::atomic<uint64_t> authenticated{0};
  };

 private:
  class Loop;  // the event loop, in tcp_store_server.cc
  TcpStoreServer() = default;

  uint16_t port_ = 0;
  Counters counters_;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace hora
