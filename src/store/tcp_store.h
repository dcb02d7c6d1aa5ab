// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The TCP store: a Store served over authenticated TCP connections, for ranks
// that are separate processes (horarun runs the server; every rank connects).
//
//   tcp_store_server.h  TcpStoreServer: one background thread, poll() loop
//   tcp_store_client.h  TcpStoreClient: the Store implementation ranks use
//   store_protocol.h    the wire format
//   this file           StoreTable: what the server does with requests, no I/O
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <vector>

#include "common/clock.h"
#include "store/store_protocol.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

namespace hora {

// The key-value table a TcpStoreServer serves. Applies decoded requests with
// the semantics of Store (store.h); a GET or WAIT whose keys are not all set
// is parked, and released when the keys appear (GET answers the value, WAIT
// an empty OK) or when its own timeout passes (a Timeout error naming the
// missing keys).
//
// Not thread-safe: owned by the server's thread.
class StoreTable {
 public:
  using ClientId = uint64_t;
  struct Reply {
    ClientId client;
    StoreResponse response;
  };

  // Applies `request` from `client` at time `now`. Returns the response, or
  // nullopt when the request was parked (a later Release() answers it).
  std::optional<StoreResponse> Apply(ClientId client, const StoreRequest& request, TimePoint now);

  // Answers the parked requests whose keys are all set now, or whose
  // deadline is at or before `now`.
  std::vector<Reply> Release(TimePoint now);

  // Forgets the parked requests of `client` (it disconnected).
  void DropClient(ClientId client);

  // Answers every parked request with `error` (server shutdown).
  std::vector<Reply> AbortAll(const Status& error);

  // The earliest deadline of a parked request; TimePoint::max() when none.
  TimePoint NextDeadline() const;

  size_t parked() const { return parked_.size(); }

 private:
  struct Parked {
    ClientId client;
    StoreRequest request;
    TimePoint deadline;
  };
  bool AllSet(const std::vector<std::string>& keys) const;
  StoreResponse Answer(const StoreRequest& request) const;

  std::map<std::string, Bytes> data_;
  std::list<Parked> parked_;
  bool changed_ = false;  // a key was set since the last Release()
};

}  // namespace hora
