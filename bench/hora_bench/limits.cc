// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "limits.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <span>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "net/socket.h"
#include "net_util.h"

namespace hora::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kChunk = 1u << 20;  // the streams' send and receive size

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

// A blocking socket whose every recv is bounded by `timeout` (SO_RCVTIMEO).
Status BlockingWithTimeout(int fd, Duration timeout) {
  HORA_RETURN_IF_ERROR(net::SetNonBlocking(fd, false));  // Accept's are non-blocking
  timeval tv{};
  tv.tv_sec =
      static_cast<time_t>(std::chrono::duration_cast<std::chrono::seconds>(timeout).count());
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return Status::Ok();
}

// Reads `fd` until its stream ends, 1 MiB at a time, cycling through `into`;
// the bytes read.
Result<uint64_t> Drain(int fd, std::span<char> into, const char* what, TimePoint deadline) {
  uint64_t received = 0;
  for (;;) {
    const size_t at = received % into.size();
    const ssize_t got = ::recv(fd, into.data() + at, std::min(kChunk, into.size() - at), 0);
    if (got == 0) return received;
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      return UnavailableError(std::string(what) + ": recv failed: " + std::strerror(errno));
    received += static_cast<uint64_t>(got);
    if (Clock::now() > deadline) return TimeoutError(std::string(what) + ": stream did not end");
  }
}

// Sends 1 MiB pieces of `from`, cycling through it, for about half a second
// (at most 256 MiB), then ends the stream.
Status Stream(int fd, std::span<const char> from, Clock::time_point t0, TimePoint deadline) {
  Status st;
  for (size_t i = 0; i < 256 && Seconds(t0) < 0.5 && st.ok(); ++i) {
    const size_t at = (i * kChunk) % from.size();
    st = net::SendAll(fd, from.data() + at, std::min(kChunk, from.size() - at), deadline);
  }
  ::shutdown(fd, SHUT_WR);
  return st;
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
    std::vector<char> chunk(kChunk, 7);
    const auto t0 = Clock::now();
    HORA_RETURN_IF_ERROR(Stream(fd.get(), chunk, t0, deadline));
    uint64_t received = 0;
    HORA_RETURN_IF_ERROR(net::RecvAll(fd.get(), &received, sizeof(received), deadline));
    return static_cast<double>(received) / Seconds(t0) / 1e9;
  }
  if (s.rank() == 1) {
    HORA_ASSIGN_OR_RETURN(net::Fd fd, net::Accept(listener.get(), deadline));
    HORA_RETURN_IF_ERROR(BlockingWithTimeout(fd.get(), timeout));
    std::vector<char> buf(kChunk);
    HORA_ASSIGN_OR_RETURN(uint64_t received, Drain(fd.get(), buf, "tcp stream limit", deadline));
    HORA_RETURN_IF_ERROR(net::SendAll(fd.get(), &received, sizeof(received), deadline));
  }
  return 0.0;
}

// Every rank streams to the next (rank r to r + 1 mod n) at once, as a ring
// allreduce loads the links, sending from one half of a buffer of `bytes`
// and receiving into the other (a ring's step sends one block of the
// message and receives another); the mean of the streams' rates. Across
// hosts with full-duplex links it is about one stream's rate; within one
// host the streams' copies share the cores and the memory, and a buffer
// larger than the caches streams slower (docs/benchmarks.md).
Result<double> TcpRingGbps(Session& s, size_t bytes, Duration timeout) {
  const TimePoint deadline = Clock::now() + timeout;
  const int n = s.size();
  HORA_ASSIGN_OR_RETURN(std::string host, ReachableAddress(s));
  HORA_ASSIGN_OR_RETURN(net::Fd listener, net::Listen(host, 0, 1));
  HORA_ASSIGN_OR_RETURN(uint16_t port, net::LocalPort(listener));
  constexpr size_t kAddr = 64;  // bytes per rank's "host:port"
  std::vector<char> mine(kAddr, 0), all(kAddr * static_cast<size_t>(n), 0);
  std::snprintf(mine.data(), kAddr, "%s:%u", host.c_str(), static_cast<unsigned>(port));
  HORA_RETURN_IF_ERROR(s.Allgather(TensorView::Flat(mine.data(), DataType::kUInt8, kAddr),
                                   TensorView::Flat(all.data(), DataType::kUInt8, all.size())));
  const char* next = &all[kAddr * static_cast<size_t>((s.rank() + 1) % n)];
  HORA_ASSIGN_OR_RETURN(net::HostPort hp,
                        net::ParseHostPort(std::string(next, strnlen(next, kAddr))));
  HORA_ASSIGN_OR_RETURN(net::Fd out, net::Connect(hp, timeout));
  HORA_ASSIGN_OR_RETURN(net::Fd in, net::Accept(listener.get(), deadline));
  HORA_RETURN_IF_ERROR(BlockingWithTimeout(in.get(), timeout));
  std::vector<char> buffer(std::max(bytes, 2 * kChunk), 7);
  const std::span<char> halves[2] = {std::span(buffer).first(buffer.size() / 2),
                                     std::span(buffer).subspan(buffer.size() / 2)};
  HORA_RETURN_IF_ERROR(s.Barrier());
  const auto t0 = Clock::now();
  Status sent;
  std::thread sender([&] { sent = Stream(out.get(), halves[0], t0, deadline); });
  Result<uint64_t> received = Drain(in.get(), halves[1], "tcp ring limit", deadline);
  const double seconds = Seconds(t0);
  sender.join();
  HORA_RETURN_IF_ERROR(sent);
  if (!received.ok()) return received.status();
  double rate = static_cast<double>(*received) / seconds / 1e9;
  HORA_RETURN_IF_ERROR(s.Allreduce(TensorView::Flat(&rate, DataType::kFloat64, 1),
                                   TensorView::Flat(&rate, DataType::kFloat64, 1)));
  return rate / n;
}

}  // namespace

Result<Limit> MeasureLimit(Session& s, bool tcp, size_t bytes, double timeout_s) {
  Limit l;
  char line[200];
  if (!tcp || s.size() < 2) {
    l.kind = "memcpy";
    if (s.rank() == 0) l.gbps = MemcpyGbps();
    std::snprintf(line, sizeof(line),
                  "limit: memory bandwidth %.2f GB/s (memcpy of 64 MiB, one thread)", l.gbps);
  } else {
    l.kind = "tcp_ring";
    HORA_ASSIGN_OR_RETURN(const double one, TcpStreamGbps(s, SecondsToDuration(timeout_s)));
    HORA_ASSIGN_OR_RETURN(l.gbps, TcpRingGbps(s, bytes, SecondsToDuration(timeout_s)));
    std::snprintf(line, sizeof(line),
                  "limit: link bandwidth %.3f GB/s per TCP stream, every rank streaming a "
                  "%.0f MiB buffer to the next at once (one stream alone: %.3f)",
                  l.gbps, static_cast<double>(std::max(bytes, 2 * kChunk)) / (1 << 20), one);
  }
  l.line = line;
  return l;
}

}  // namespace hora::bench
