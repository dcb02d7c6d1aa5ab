// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The rendezvous seam: a small key-value store through which ranks find each
// other (addresses, shared-memory names, sizes). Implementations: in-memory
// (ranks as threads), file and TCP (added with the multi-process transports).
//
// Every blocking call takes a timeout and fails with a Timeout status naming
// the keys it waited for. All methods are thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "hora/status.h"

namespace hora {

using Bytes = std::vector<uint8_t>;

class Store {
 public:
  virtual ~Store() = default;

  // Sets `key` to `value`, replacing any previous value, and wakes waiters.
  virtual Status Set(const std::string& key, const Bytes& value) = 0;

  // Returns the value of `key`, waiting up to `timeout` for it to be set.
  virtual Result<Bytes> Get(const std::string& key, Duration timeout) = 0;

  // Adds `delta` to the 64-bit counter stored at `key` (absent = 0) and
  // returns the new value. A key holding a non-counter value is an error.
  virtual Result<int64_t> Add(const std::string& key, int64_t delta) = 0;

  // Waits until every key in `keys` is set, up to `timeout`.
  virtual Status Wait(const std::vector<std::string>& keys, Duration timeout) = 0;

  // Removes `key`; returns whether it existed.
  virtual Result<bool> Delete(const std::string& key) = 0;

  // Why every wait of those using this store should end now (an elastic
  // world that broke while it connected: api/abortable_store.h), or OK.
  // Waits that are not the store's own (a transport's accepts and
  // connects) ask between slices. OK here, at no cost.
  virtual Status Abandoned() { return Status::Ok(); }
};

}  // namespace hora
