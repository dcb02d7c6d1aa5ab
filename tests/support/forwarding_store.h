// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A store that passes every call to an in-memory store: tests derive from
// it and change one call (a wait that fails, a world abandoned).
#pragma once

#include <string>
#include <vector>

#include "store/memory_store.h"

namespace hora::testing {

class ForwardingStore : public Store {
 public:
  Status Set(const std::string& key, const Bytes& value) override { return inner_.Set(key, value); }
  Result<Bytes> Get(const std::string& key, Duration timeout) override {
    return inner_.Get(key, timeout);
  }
  Result<int64_t> Add(const std::string& key, int64_t delta) override {
    return inner_.Add(key, delta);
  }
  Status Wait(const std::vector<std::string>& keys, Duration timeout) override {
    return inner_.Wait(keys, timeout);
  }
  Result<bool> Delete(const std::string& key) override { return inner_.Delete(key); }

 private:
  MemoryStore inner_;
};

}  // namespace hora::testing
