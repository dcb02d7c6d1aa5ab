// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "limits.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/clock.h"
#include "net/socket.h"
#include "net_util.h"

namespace hora::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Best of 5 copies of 64 MiB, counting the bytes copied once.
double MemcpyGbps() {
  const size_t n = 64u << 20;
  std::vector<char> a(n, 1), b(n, 2);
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(i % 2 ? a.data() : b.data(), i % 2 ? b.data() : a.data(), n);
    best = std::min(best, Seconds(t0));
  }
  return static_cast<double>(n) / best / 1e9;
}

// Rank 0 streams for about half a second (at most 256 MiB) to rank 1, which
// answers with the byte count once the stream ends.
Result<double> TcpStreamGbps(Session& s, Duration timeout) {
  const TimePoint deadline = Clock::now() + timeout;
  net::Fd listener;
  std::string where;
  if (s.rank() == 1) {
    HORA_ASSIGN_OR_RETURN(std::string host, ReachableAddress(s));
    HORA_ASSIGN_OR_RETURN(listener, net::Listen(host, 0, 1));
    HORA_ASSIGN_OR_RETURN(uint16_t port, net::LocalPort(listener));
    where = host + ":" + std::to_string(port);
  }
  HORA_ASSIGN_OR_RETURN(where, BroadcastText(s, where, 1));
  if (s.rank() == 0) {
    HORA_ASSIGN_OR_RETURN(net::HostPort hp, net::ParseHostPort(where));
    HORA_ASSIGN_OR_RETURN(net::Fd fd, net::Connect(hp, timeout));
    std::vector<char> chunk(1u << 20, 7);
    const auto t0 = Clock::now();
    for (int i = 0; i < 256 && Seconds(t0) < 0.5; ++i)
      HORA_RETURN_IF_ERROR(net::SendAll(fd.get(), chunk.data(), chunk.size(), deadline));
    ::shutdown(fd.get(), SHUT_WR);
    uint64_t received = 0;
    HORA_RETURN_IF_ERROR(net::RecvAll(fd.get(), &received, sizeof(received), deadline));
    return static_cast<double>(received) / Seconds(t0) / 1e9;
  }
  if (s.rank() == 1) {
    HORA_ASSIGN_OR_RETURN(net::Fd fd, net::Accept(listener.get(), deadline));
    HORA_RETURN_IF_ERROR(net::SetNonBlocking(fd.get(), false));  // Accept's are non-blocking
    timeval tv{};                                                // every recv is bounded too
    tv.tv_sec =
        static_cast<time_t>(std::chrono::duration_cast<std::chrono::seconds>(timeout).count());
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    std::vector<char> buf(1u << 20);
    uint64_t received = 0;
    for (;;) {
      const ssize_t got = ::recv(fd.get(), buf.data(), buf.size(), 0);
      if (got == 0) break;
      if (got < 0 && errno == EINTR) continue;
      if (got < 0)
        return UnavailableError(std::string("tcp stream limit: recv failed: ") +
                                std::strerror(errno));
      received += static_cast<uint64_t>(got);
      if (Clock::now() > deadline) return TimeoutError("tcp stream limit: stream did not end");
    }
    HORA_RETURN_IF_ERROR(net::SendAll(fd.get(), &received, sizeof(received), deadline));
  }
  return 0.0;
}

}  // namespace

Result<Limit> MeasureLimit(Session& s, bool tcp, double timeout_s) {
  Limit l;
  char line[160];
  if (!tcp || s.size() < 2) {
    l.kind = "memcpy";
    if (s.rank() == 0) l.gbps = MemcpyGbps();
    std::snprintf(line, sizeof(line),
                  "limit: memory bandwidth %.2f GB/s (memcpy of 64 MiB, one thread)", l.gbps);
  } else {
    l.kind = "tcp_stream";
    HORA_ASSIGN_OR_RETURN(l.gbps, TcpStreamGbps(s, SecondsToDuration(timeout_s)));
    std::snprintf(line, sizeof(line),
                  "limit: link bandwidth %.3f GB/s (one TCP stream, rank 0 to rank 1)", l.gbps);
  }
  l.line = line;
  return l;
}

}  // namespace hora::bench
