// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "api/key_recording_store.h"

#include <utility>

namespace hora {

Status KeyRecordingStore::Set(const std::string& key, const Bytes& value) {
  {
    MutexLock lock(mu_);
    if (recording_) keys_.push_back(key);
  }
  return inner_->Set(key, value);
}

size_t KeyRecordingStore::DeleteRecorded() {
  std::vector<std::string> keys;
  {
    MutexLock lock(mu_);
    recording_ = false;
    keys.swap(keys_);
  }
  size_t deleted = 0;
  for (const std::string& key : keys) {
    Result<bool> existed = inner_->Delete(key);
    deleted += existed.ok() && *existed ? 1 : 0;
  }
  return deleted;
}

}  // namespace hora
