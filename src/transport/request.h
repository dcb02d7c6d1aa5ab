// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The completion state of one asynchronous send or receive. A transport
// creates it, completes it exactly once (from any thread) with a Status, and
// the algorithm waits on it with a deadline.
//
// Thread-safety: Complete() and Wait() may race freely.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/done_flag.h"
#include "hora/status.h"

namespace hora {

class RequestState {
 public:
  RequestState(bool is_send, int peer, size_t bytes)
      : is_send_(is_send), peer_(peer), bytes_(bytes) {}

  // Marks the request finished. Later calls are ignored (first result wins).
  void Complete(Status status);

  bool done() const { return done_.IsSet(); }

  // Waits until done or `deadline`. Returns the completion status, or a
  // Timeout status describing what was awaited ("receiving 64 KiB from rank 1").
  Status Wait(TimePoint deadline);

  // The request's result; only meaningful once done() (it never changes
  // after that, so reading it takes no lock).
  const Status& status() const { return status_; }

  bool is_send() const { return is_send_; }
  // The peer in the numbering of the transport that created the request.
  int peer() const { return peer_; }

  // For transports built from others (shared memory within a host + TCP
  // across): which inner transport owns the request, and the peer's rank in
  // the job for messages. Set once, right after creation, before the request
  // is shared.
  void SetRoute(int route, int display_peer) {
    route_ = route;
    display_peer_ = display_peer;
  }
  int route() const { return route_; }
  size_t bytes() const { return bytes_; }
  // "sending 64 KiB to rank 1" / "receiving 64 KiB from rank 1".
  std::string Describe() const;

 private:
  const bool is_send_;
  const int peer_;
  const size_t bytes_;
  int route_ = -1;
  int display_peer_ = -1;
  // Completing takes no lock: the first Complete() claims done_, writes
  // status_, then sets done_ (which wakes a sleeper).
  DoneFlag done_;
  Status status_;  // written once, before done_ is set
};

using Request = std::shared_ptr<RequestState>;

}  // namespace hora
