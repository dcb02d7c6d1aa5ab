// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A Store held in this process's memory, shared by ranks running as threads.
#pragma once

#include <condition_variable>
#include <map>

#include "common/mutex.h"
#include "store/store.h"

namespace hora {

class MemoryStore final : public Store {
 public:
  Status Set(const std::string& key, const Bytes& value) override;
  Result<Bytes> Get(const std::string& key, Duration timeout) override;
  Result<int64_t> Add(const std::string& key, int64_t delta) override;
  Status Wait(const std::vector<std::string>& keys, Duration timeout) override;
  Result<bool> Delete(const std::string& key) override;

 private:
  Mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, Bytes> data_ HORA_GUARDED_BY(mu_);
};

}  // namespace hora
