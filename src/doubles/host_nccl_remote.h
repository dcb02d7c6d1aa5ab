// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The host device's NCCL (host_nccl.h) between processes: the process that
// makes a communicator's id keeps its Hub (host_nccl_hub.h) and serves it
// to the ranks of other processes, which reach it through a Unix socket of
// the abstract namespace (one host, as the host device's ranks are). Each
// call of theirs is one connection: a request (what, which rank, the
// deadline left, the bytes), served on a thread of the server against the
// Hub as a rank of that process is, and one reply (a status, and the
// bytes). Only the same user's processes are served, and a request's ranks
// and sizes are checked. A rank's process that ends leaves the others'
// waits to their deadline or their own abort, as a GPU's does; so does the
// serving process that ends (their calls cannot reach it: they wait). A
// server that closes (its library, with its session) ends the waits of
// the ranks it serves, saying so.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/clock.h"
#include "doubles/host_nccl_hub.h"
#include "hora/status.h"

namespace hora::host_nccl {

class HubServer {
 public:
  // Listens at a name of this process (its id and this object's address).
  static Result<std::unique_ptr<HubServer>> Start();
  // Stops listening, ends the waits of the ranks it serves (saying that
  // this process ended), and joins its threads.
  ~HubServer();
  HubServer(const HubServer&) = delete;
  HubServer& operator=(const HubServer&) = delete;

  // `hub`, served under the key returned (not held: held for each rank of
  // another process that joined, until it leaves).
  uint64_t Add(const std::shared_ptr<Hub>& hub);
  // The abstract socket's name (without its leading NUL).
  const std::string& name() const;

  class Impl;

 private:
  explicit HubServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Rank `rank` of `size` joins hub `key` of the server named `name` (in
// another process). `timeout` bounds the calls that take no deadline.
Result<std::shared_ptr<Meeting>> JoinServed(const std::string& name, uint64_t key, int size,
                                            int rank, Duration timeout);

}  // namespace hora::host_nccl
