// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The Store that ranks use to reach a TcpStoreServer (see tcp_store.h) over
// one authenticated TCP connection.
//
// Bounds: Connect retries until `timeout` (the server may start after its
// clients). Get and Wait are bounded by their own timeout, which the server
// enforces, plus kResponseMargin for the network; Set, Add and Delete by the
// `timeout` given to Connect. A server that does not answer in time, or an
// unreachable one, gives an error naming host:port.
//
// Errors: every error message starts with "store <host:port>: ". A Timeout
// from the server names the keys it waited for. After an I/O or protocol
// error mid-request the connection is out of step and is closed; every later
// call fails at once with Unavailable naming the first error.
//
// Thread-safety: all methods are thread-safe; one request is in flight at a
// time (a mutex covers each request and its response), so a thread blocked
// in Get or Wait delays the other threads' calls on the same client. Threads
// that wait for keys the others set should each use their own client.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "net/socket.h"
#include "store/store.h"
#include "store/store_protocol.h"

namespace hora {

class TcpStoreClient final : public Store {
 public:
  // Network allowance added to the timeout of Get and Wait.
  static constexpr Duration kResponseMargin = std::chrono::seconds(5);

  // Connects and authenticates with `secret`, retrying for up to `timeout`.
  static Result<std::unique_ptr<TcpStoreClient>> Connect(const net::HostPort& server,
                                                         std::string_view secret, Duration timeout);

  Status Set(const std::string& key, const Bytes& value) override;
  Result<Bytes> Get(const std::string& key, Duration timeout) override;
  Result<int64_t> Add(const std::string& key, int64_t delta) override;
  Status Wait(const std::vector<std::string>& keys, Duration timeout) override;
  Result<bool> Delete(const std::string& key) override;

  const net::HostPort& server() const { return server_; }

 private:
  TcpStoreClient(net::HostPort server, net::Fd fd, Duration op_timeout)
      : server_(std::move(server)), op_timeout_(op_timeout), fd_(std::move(fd)) {}

  // Sends `request` and reads its response, bounded by `io_timeout`. A
  // non-OK response becomes its Status (code and message kept).
  Result<Bytes> Call(const StoreRequest& request, Duration io_timeout) HORA_EXCLUDES(mu_);
  Status Context(const Status& st) const;

  const net::HostPort server_;
  const Duration op_timeout_;
  Mutex mu_;
  net::Fd fd_ HORA_GUARDED_BY(mu_);     // invalid once broken
  Status broken_ HORA_GUARDED_BY(mu_);  // the error that closed the connection
};

}  // namespace hora
