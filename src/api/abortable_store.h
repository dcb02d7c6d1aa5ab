// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A store whose waits also end once an abort key is set. An elastic world
// whose member ends while the world is still connecting (a second loss
// during a re-formation) would otherwise keep the others waiting for it
// until the start timeout: horarun sets the generation's broken key
// (launch/elastic_place.h), and every wait of the connecting ranks ends
// with UnavailableError naming why, which the elastic loop answers with the
// next world. Waits are cut into slices of `slice`, the key read between
// them (one store round trip each).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "store/store.h"

namespace hora {

class AbortableStore : public Store {
 public:
  AbortableStore(std::shared_ptr<Store> inner, std::string abort_key,
                 Duration slice = std::chrono::milliseconds(100))
      : inner_(std::move(inner)), abort_key_(std::move(abort_key)), slice_(slice) {}

  Status Set(const std::string& key, const Bytes& value) override {
    return inner_->Set(key, value);
  }
  Result<Bytes> Get(const std::string& key, Duration timeout) override;
  Result<int64_t> Add(const std::string& key, int64_t delta) override {
    return inner_->Add(key, delta);
  }
  Status Wait(const std::vector<std::string>& keys, Duration timeout) override;
  Result<bool> Delete(const std::string& key) override { return inner_->Delete(key); }
  // The abort's error, or OK while the key is unset (one round trip).
  Status Abandoned() override;

 private:
  std::shared_ptr<Store> inner_;
  const std::string abort_key_;
  const Duration slice_;
};

}  // namespace hora
