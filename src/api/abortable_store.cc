// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "api/abortable_store.h"

#include <algorithm>

namespace hora {
namespace {

// The timeout of a whole wait (its last slice's error would name a slice).
Status WaitedAll(Duration timeout, const std::string& keys) {
  return TimeoutError("store: timed out after " + std::to_string(DurationToSeconds(timeout)) +
                      "s waiting for key(s) " + keys);
}

}  // namespace

Status AbortableStore::Abandoned() {
  Result<Bytes> why = inner_->Get(abort_key_, Duration::zero());
  if (!why.ok()) return Status::Ok();  // (unset: a timeout at once)
  return UnavailableError(std::string(why->begin(), why->end()));
}

Result<Bytes> AbortableStore::Get(const std::string& key, Duration timeout) {
  const TimePoint deadline = DeadlineAfter(Clock::now(), timeout);
  for (;;) {
    const Duration left = std::max(Duration::zero(), deadline - Clock::now());
    Result<Bytes> got = inner_->Get(key, std::min(left, slice_));
    if (got.ok() || got.status().code() != StatusCode::kTimeout) return got;
    HORA_RETURN_IF_ERROR(Abandoned());
    if (left <= slice_) return WaitedAll(timeout, key);
  }
}

Status AbortableStore::Wait(const std::vector<std::string>& keys, Duration timeout) {
  const TimePoint deadline = DeadlineAfter(Clock::now(), timeout);
  for (;;) {
    const Duration left = std::max(Duration::zero(), deadline - Clock::now());
    Status st = inner_->Wait(keys, std::min(left, slice_));
    if (st.ok() || st.code() != StatusCode::kTimeout) return st;
    HORA_RETURN_IF_ERROR(Abandoned());
    if (left <= slice_) {
      std::string joined;
      for (const std::string& k : keys) joined += (joined.empty() ? "" : ", ") + k;
      return WaitedAll(timeout, joined);
    }
  }
}

}  // namespace hora
