// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "store/tcp_store.h"

#include <cstdio>
#include <cstring>

namespace hora {
namespace {

StoreResponse Error(Status st) { return {st.code(), {}, st.message()}; }

std::string JoinKeys(const std::vector<std::string>& keys) {
  std::string s;
  for (const auto& k : keys) s += (s.empty() ? "'" : ", '") + k + "'";
  return s;
}

Bytes CounterBytes(int64_t v) {
  Bytes b(sizeof v);
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}

}  // namespace

bool StoreTable::AllSet(const std::vector<std::string>& keys) const {
  for (const auto& k : keys) {
    if (data_.find(k) == data_.end()) return false;
  }
  return true;
}

// The answer to a GET or WAIT whose keys are all set.
StoreResponse StoreTable::Answer(const StoreRequest& request) const {
  if (request.op == StoreOp::kGet) return {StatusCode::kOk, data_.at(request.keys[0]), {}};
  return {};
}

std::optional<StoreResponse> StoreTable::Apply(ClientId client, const StoreRequest& request,
                                               TimePoint now) {
  switch (request.op) {
    case StoreOp::kSet:
      data_[request.keys[0]] = request.value;
      changed_ = true;
      return StoreResponse{};
    case StoreOp::kAdd: {
      const std::string& key = request.keys[0];
      auto it = data_.find(key);
      int64_t value = 0;
      if (it != data_.end()) {
        if (it->second.size() != sizeof value) {
          return Error(InvalidArgument("store key '" + key + "' holds " +
                                       std::to_string(it->second.size()) +
                                       " bytes, not a counter"));
        }
        std::memcpy(&value, it->second.data(), sizeof value);
      }
      value =
          static_cast<int64_t>(static_cast<uint64_t>(value) + static_cast<uint64_t>(request.delta));
      data_[key] = CounterBytes(value);
      changed_ = true;
      return StoreResponse{StatusCode::kOk, CounterBytes(value), {}};
    }
    case StoreOp::kDelete: {
      const bool existed = data_.erase(request.keys[0]) > 0;
      return StoreResponse{StatusCode::kOk, Bytes{static_cast<uint8_t>(existed ? 1 : 0)}, {}};
    }
    case StoreOp::kGet:
    case StoreOp::kWait:
      if (AllSet(request.keys)) return Answer(request);
      parked_.push_back({client, request, now + std::chrono::milliseconds(request.timeout_ms)});
      return std::nullopt;
    default:
      return Error(InvalidArgument("store: " + StoreOpName(static_cast<uint16_t>(request.op)) +
                                   " is not a request"));
  }
}

std::vector<StoreTable::Reply> StoreTable::Release(TimePoint now) {
  std::vector<Reply> replies;
  const bool check_keys = changed_;
  changed_ = false;
  for (auto it = parked_.begin(); it != parked_.end();) {
    const StoreRequest& r = it->request;
    if (check_keys && AllSet(r.keys)) {
      replies.push_back({it->client, Answer(r)});
    } else if (it->deadline <= now) {
      std::vector<std::string> missing;
      for (const auto& k : r.keys) {
        if (data_.find(k) == data_.end()) missing.push_back(k);
      }
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", static_cast<double>(r.timeout_ms) / 1000.0);
      replies.push_back(
          {it->client, Error(TimeoutError("timed out after " + std::string(secs) +
                                          " s waiting for key(s) " + JoinKeys(missing)))});
    } else {
      ++it;
      continue;
    }
    it = parked_.erase(it);
  }
  return replies;
}

void StoreTable::DropClient(ClientId client) {
  parked_.remove_if([&](const Parked& p) { return p.client == client; });
}

std::vector<StoreTable::Reply> StoreTable::AbortAll(const Status& error) {
  std::vector<Reply> replies;
  for (const auto& p : parked_) replies.push_back({p.client, Error(error)});
  parked_.clear();
  return replies;
}

TimePoint StoreTable::NextDeadline() const {
  TimePoint next = TimePoint::max();
  for (const auto& p : parked_) next = std::min(next, p.deadline);
  return next;
}

}  // namespace hora
