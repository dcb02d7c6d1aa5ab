// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A store that remembers the keys set through it. A Session's rendezvous
// keys (addresses, shared-memory names, settings) are read only while its
// ranks connect; once every rank has taken part in a collective, each rank
// deletes the keys it set, so that a store outliving Sessions (horarun's,
// through every init() and every elastic reset) does not grow with them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "store/store.h"

namespace hora {

class KeyRecordingStore : public Store {
 public:
  explicit KeyRecordingStore(std::shared_ptr<Store> inner) : inner_(std::move(inner)) {}

  Status Set(const std::string& key, const Bytes& value) override;
  Result<Bytes> Get(const std::string& key, Duration timeout) override {
    return inner_->Get(key, timeout);
  }
  Result<int64_t> Add(const std::string& key, int64_t delta) override {
    return inner_->Add(key, delta);  // (counters outlive Sessions: not recorded)
  }
  Status Wait(const std::vector<std::string>& keys, Duration timeout) override {
    return inner_->Wait(keys, timeout);
  }
  Result<bool> Delete(const std::string& key) override { return inner_->Delete(key); }
  Status Abandoned() override { return inner_->Abandoned(); }

  // Deletes the keys set through this store so far (best effort: a store
  // gone loses nothing that matters) and records none from now on; returns
  // how many it deleted.
  size_t DeleteRecorded();

 private:
  std::shared_ptr<Store> inner_;
  Mutex mu_;
  bool recording_ HORA_GUARDED_BY(mu_) = true;
  std::vector<std::string> keys_ HORA_GUARDED_BY(mu_);
};

}  // namespace hora
