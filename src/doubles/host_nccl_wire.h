// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The host NCCL's calls between processes (host_nccl_remote.h), on the
// wire: a request and its payload; a reply, its message and its parts.
// Both sides are of one build on one host, as the host device's ranks are.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/clock.h"
#include "hora/status.h"
#include "net/socket.h"

namespace hora::host_nccl {

enum class Op : uint32_t { kJoin = 1, kMeet, kPost, kTake, kAbort, kEnd, kEnded, kLeave };

// A call: `bytes` of payload follow (Meet's and Post's data, Abort's and
// End's reason).
struct Request {
  uint32_t op = 0;
  int32_t rank = 0;   // the caller's (Post: the sender; Take: the receiver)
  int32_t other = 0;  // Post: the receiver; Take: the sender
  int32_t size = 0;   // Join
  uint64_t key = 0;
  uint64_t seq = 0;      // Meet
  int64_t wait_ms = -1;  // until the deadline (-1: none)
  uint64_t bytes = 0;
  int32_t code = 0;  // End: the reason's code
  uint32_t pad = 0;
};

// The answer: a status (`message` bytes of text follow), then `parts`
// blocks, each its length (uint64) and bytes.
struct Reply {
  int32_t code = 0;
  uint32_t message = 0;
  uint64_t parts = 0;
};

using Parts = std::vector<std::vector<std::byte>>;

constexpr Duration kReplyMargin = std::chrono::seconds(10);
// The bound of an end's or a leave's call (the caller does not wait for
// the others).
constexpr Duration kBriefCall = std::chrono::seconds(2);
// The most bytes one call or reply carries (a test tool's sizes).
constexpr uint64_t kMostBytes = uint64_t{1} << 32;

inline sockaddr_un Address(const std::string& name, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof a.sun_path - 1);
  std::memcpy(a.sun_path + 1, name.data(), n);  // (sun_path[0] = 0: abstract)
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

inline Status SendReply(int fd, const Status& st, const Parts& parts) {
  const TimePoint deadline = Clock::now() + kReplyMargin;
  Reply r;
  r.code = static_cast<int32_t>(st.code());
  r.message = static_cast<uint32_t>(st.message().size());
  r.parts = parts.size();
  HORA_RETURN_IF_ERROR(net::SendAll(fd, &r, sizeof r, deadline));
  HORA_RETURN_IF_ERROR(net::SendAll(fd, st.message().data(), st.message().size(), deadline));
  for (const std::vector<std::byte>& p : parts) {
    const uint64_t n = p.size();
    HORA_RETURN_IF_ERROR(net::SendAll(fd, &n, sizeof n, deadline));
    HORA_RETURN_IF_ERROR(net::SendAll(fd, p.data(), p.size(), deadline));
  }
  return Status::Ok();
}

inline TimePoint DeadlineOf(int64_t wait_ms) {
  return wait_ms < 0 ? TimePoint::max() : Clock::now() + std::chrono::milliseconds(wait_ms);
}

inline int64_t WaitOf(TimePoint deadline) {
  if (deadline == TimePoint::max()) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max<int64_t>(0, left.count());
}

inline std::string Text(const std::vector<std::byte>& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}
inline std::vector<std::byte> Bytes(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return std::vector<std::byte>(p, p + s.size());
}

}  // namespace hora::host_nccl
