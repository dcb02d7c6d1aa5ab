// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "store/memory_store.h"

#include <cstring>

namespace hora {
namespace {

std::string JoinKeys(const std::vector<std::string>& keys) {
  std::string s;
  for (const auto& k : keys) s += (s.empty() ? "'" : ", '") + k + "'";
  return s;
}

}  // namespace

Status MemoryStore::Set(const std::string& key, const Bytes& value) {
  {
    MutexLock lock(mu_);
    data_[key] = value;
  }
  changed_.notify_all();
  return Status::Ok();
}

Result<Bytes> MemoryStore::Get(const std::string& key, Duration timeout) {
  HORA_RETURN_IF_ERROR(Wait({key}, timeout));
  MutexLock lock(mu_);
  auto it = data_.find(key);
  if (it == data_.end()) return UnavailableError("store key '" + key + "' was deleted while read");
  return it->second;
}

Result<int64_t> MemoryStore::Add(const std::string& key, int64_t delta) {
  int64_t value = 0;
  {
    MutexLock lock(mu_);
    Bytes& b = data_[key];
    if (!b.empty() && b.size() != sizeof(int64_t)) {
      return InvalidArgument("store key '" + key + "' holds " + std::to_string(b.size()) +
                             " bytes, not a counter");
    }
    if (!b.empty()) std::memcpy(&value, b.data(), sizeof value);
    value = static_cast<int64_t>(static_cast<uint64_t>(value) + static_cast<uint64_t>(delta));
    b.resize(sizeof value);
    std::memcpy(b.data(), &value, sizeof value);
  }
  changed_.notify_all();
  return value;
}

Status MemoryStore::Wait(const std::vector<std::string>& keys, Duration timeout) {
  MutexLock lock(mu_);
  // (Runs with mu_ held, where the analysis cannot see it.)
  auto all_set = [&]() HORA_NO_THREAD_SAFETY_ANALYSIS {
    for (const auto& k : keys) {
      if (data_.find(k) == data_.end()) return false;
    }
    return true;
  };
  if (!changed_.wait_for(lock.native(), timeout, all_set)) {
    std::vector<std::string> missing;
    for (const auto& k : keys) {
      if (data_.find(k) == data_.end()) missing.push_back(k);
    }
    return TimeoutError("store: timed out after " + std::to_string(DurationToSeconds(timeout)) +
                        "s waiting for key(s) " + JoinKeys(missing));
  }
  return Status::Ok();
}

Result<bool> MemoryStore::Delete(const std::string& key) {
  MutexLock lock(mu_);
  return data_.erase(key) > 0;
}

}  // namespace hora
