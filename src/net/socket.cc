// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <thread>

namespace hora::net {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

std::string FormatSeconds(Duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", DurationToSeconds(d));
  return buf;
}

std::string FormatSockaddr(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    sockaddr_in in;
    std::memcpy(&in, &ss, sizeof in);
    inet_ntop(AF_INET, &in.sin_addr, host, sizeof host);
    return HostPort{host, ntohs(in.sin_port)}.ToString();
  }
  if (ss.ss_family == AF_INET6) {
    sockaddr_in6 in6;
    std::memcpy(&in6, &ss, sizeof in6);
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
      inet_ntop(AF_INET, &in6.sin6_addr.s6_addr[12], host, sizeof host);
    } else {
      inet_ntop(AF_INET6, &in6.sin6_addr, host, sizeof host);
    }
    return HostPort{host, ntohs(in6.sin6_port)}.ToString();
  }
  return "?";
}

// The address of a sockaddr_in or sockaddr_in6 as IPv6 bytes (IPv4 as
// v4-mapped), for comparing; false for other families.
bool AddressBytes(const sockaddr_storage& ss, in6_addr* out) {
  if (ss.ss_family == AF_INET) {
    sockaddr_in in;
    std::memcpy(&in, &ss, sizeof in);
    std::memset(out, 0, sizeof *out);
    out->s6_addr[10] = 0xff;
    out->s6_addr[11] = 0xff;
    std::memcpy(&out->s6_addr[12], &in.sin_addr, 4);
    return true;
  }
  if (ss.ss_family == AF_INET6) {
    sockaddr_in6 in6;
    std::memcpy(&in6, &ss, sizeof in6);
    *out = in6.sin6_addr;
    return true;
  }
  return false;
}

// Options of every connected stream: no Nagle delay (small messages are
// latency), and on a connection within the host, Reno for its congestion
// control (WithinHost).
void ConfigureStream(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (!StreamWithinHost(fd)) return;
  // (Reno is built in and allowed to every user; should it fail, the
  // system's choice stays.)
  static constexpr char kReno[] = "reno";
  setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, kReno, sizeof kReno - 1);
}

// Waits until `fd` is ready for `events` or `deadline` passes.
Status PollOne(int fd, short events, TimePoint deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, PollTimeoutMs(deadline));
    if (rc > 0) return Status::Ok();
    if (rc == 0) return TimeoutError(std::string("timed out ") + what);
    if (errno != EINTR) return UnavailableError(std::string("poll: ") + ErrnoText(errno));
  }
}

struct AddrInfoList {
  addrinfo* head = nullptr;
  ~AddrInfoList() {
    if (head != nullptr) freeaddrinfo(head);
  }
};

// One nonblocking connect attempt to `ai`, bounded by `deadline`. Returns the
// connected socket, or -1 with `*err` set.
int TryConnect(const addrinfo& ai, TimePoint deadline, int* err) {
  Fd fd(socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai.ai_protocol));
  if (!fd.valid()) {
    *err = errno;
    return -1;
  }
  if (connect(fd.get(), ai.ai_addr, ai.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      *err = errno;
      return -1;
    }
    if (!PollOne(fd.get(), POLLOUT, deadline, "connecting").ok()) {
      *err = ETIMEDOUT;
      return -1;
    }
    int so_error = 0;
    socklen_t len = sizeof so_error;
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len);
    if (so_error != 0) {
      *err = so_error;
      return -1;
    }
  }
  if (!SetNonBlocking(fd.get(), false).ok()) {
    *err = errno;
    return -1;
  }
  ConfigureStream(fd.get());
  return fd.Release();
}

}  // namespace

bool WithinHost(const sockaddr_storage& local, const sockaddr_storage& peer) {
  in6_addr mine{}, theirs{};
  if (!AddressBytes(local, &mine) || !AddressBytes(peer, &theirs)) return false;
  if (IN6_IS_ADDR_LOOPBACK(&theirs)) return true;
  if (IN6_IS_ADDR_V4MAPPED(&theirs) && theirs.s6_addr[12] == 127) return true;  // 127.0.0.0/8
  return std::memcmp(&mine, &theirs, sizeof mine) == 0;
}

bool StreamWithinHost(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof local, peer_len = sizeof peer;
  return getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0 &&
         getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0 &&
         WithinHost(local, peer);
}

void Fd::Reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Result<HostPort> ParseHostPort(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("invalid address '" + std::string(text) + "': " + why +
                           " (expected host:port, 1.2.3.4:port or [ipv6]:port)");
  };
  std::string_view host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return bad("missing ']'");
    host = text.substr(1, close - 1);
    if (close + 1 >= text.size() || text[close + 1] != ':') return bad("missing ':port'");
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("missing ':port'");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return bad("IPv6 addresses need [brackets]");
  }
  if (host.empty()) return bad("empty host");
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value == 0 ||
      value > 65535) {
    return bad("port '" + std::string(port) + "' is not a number in 1..65535");
  }
  return HostPort{std::string(host), static_cast<uint16_t>(value)};
}

Result<Fd> Listen(const std::string& bind_host, uint16_t port, int backlog) {
  std::string host = bind_host;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const bool any = host.empty() || host == "*";
  const std::string where = any ? "*:" + std::to_string(port) : HostPort{host, port}.ToString();
  addrinfo hints{};
  hints.ai_family = any ? AF_INET6 : AF_UNSPEC;  // "any": dual-stack first, IPv4 below
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  AddrInfoList list;
  const std::string port_text = std::to_string(port);
  int rc = getaddrinfo(any ? nullptr : host.c_str(), port_text.c_str(), &hints, &list.head);
  if (rc != 0 && any) {
    hints.ai_family = AF_INET;
    rc = getaddrinfo(nullptr, port_text.c_str(), &hints, &list.head);
  }
  if (rc != 0) return InvalidArgument("cannot listen on " + where + ": " + gai_strerror(rc));
  int last_err = EADDRNOTAVAIL;
  for (const addrinfo* ai = list.head; ai != nullptr; ai = ai->ai_next) {
    Fd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last_err = errno;
      continue;
    }
    int one = 1;
    int zero = 0;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (any && ai->ai_family == AF_INET6) {
      setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    }
    if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd.get(), backlog) != 0) {
      last_err = errno;
      continue;
    }
    return fd;
  }
  if (any && hints.ai_family == AF_INET6) return Listen("0.0.0.0", port, backlog);
  return UnavailableError("cannot listen on " + where + ": " + ErrnoText(last_err));
}

Result<uint16_t> LocalPort(const Fd& fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return InternalError(std::string("getsockname: ") + ErrnoText(errno));
  }
  if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) {
    return InternalError("getsockname: not an IP socket");
  }
  // sin_port and sin6_port sit at the same offset.
  static_assert(offsetof(sockaddr_in, sin_port) == offsetof(sockaddr_in6, sin6_port));
  uint16_t port = 0;
  std::memcpy(&port, reinterpret_cast<const char*>(&ss) + offsetof(sockaddr_in, sin_port),
              sizeof port);
  return static_cast<uint16_t>(ntohs(port));
}

Result<Fd> Accept(int listen_fd, TimePoint deadline, std::string* peer) {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd =
        accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      ConfigureStream(fd);
      if (peer != nullptr) *peer = FormatSockaddr(ss);
      return Fd(fd);
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return UnavailableError(std::string("accept: ") + ErrnoText(errno));
    }
    if (Clock::now() >= deadline) return TimeoutError("accept: no connection arrived");
    HORA_RETURN_IF_ERROR(PollOne(listen_fd, POLLIN, deadline, "waiting for a connection"));
  }
}

Result<Fd> Connect(const HostPort& addr, Duration timeout) {
  const TimePoint deadline = Clock::now() + timeout;
  const std::string port_text = std::to_string(addr.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  std::string last_reason = "timed out";
  auto backoff = std::chrono::milliseconds(10);
  for (;;) {
    AddrInfoList list;
    int rc = getaddrinfo(addr.host.c_str(), port_text.c_str(), &hints, &list.head);
    if (rc != 0 && rc != EAI_AGAIN) {
      return InvalidArgument("could not resolve '" + addr.host + "' (connecting to " +
                             addr.ToString() + "): " + gai_strerror(rc));
    }
    if (rc == EAI_AGAIN) last_reason = gai_strerror(rc);
    for (const addrinfo* ai = list.head; ai != nullptr; ai = ai->ai_next) {
      int err = 0;
      int fd = TryConnect(*ai, deadline, &err);
      if (fd >= 0) return Fd(fd);
      last_reason = ErrnoText(err);
    }
    const TimePoint now = Clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<Duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
  return UnavailableError("could not connect to " + addr.ToString() + " within " +
                          FormatSeconds(timeout) + ": " + last_reason);
}

Status SendAll(int fd, const void* data, size_t n, TimePoint deadline) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t sent = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      p += sent;
      n -= static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      return UnavailableError("send failed: " + ErrnoText(errno));
    }
    HORA_RETURN_IF_ERROR(
        PollOne(fd, POLLOUT, deadline, ("sending (" + std::to_string(n) + " bytes left)").c_str()));
  }
  return Status::Ok();
}

Status RecvAll(int fd, void* data, size_t n, TimePoint deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    ssize_t got = recv(fd, p, n, MSG_DONTWAIT);
    if (got > 0) {
      p += got;
      n -= static_cast<size_t>(got);
      continue;
    }
    if (got == 0) return UnavailableError("connection closed by peer");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return UnavailableError("recv failed: " + ErrnoText(errno));
    }
    HORA_RETURN_IF_ERROR(PollOne(fd, POLLIN, deadline,
                                 ("receiving (" + std::to_string(n) + " bytes missing)").c_str()));
  }
  return Status::Ok();
}

Status SetNonBlocking(int fd, bool nonblocking) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0) return InternalError(std::string("fcntl(F_GETFL): ") + ErrnoText(errno));
  flags = nonblocking ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd, F_SETFL, flags) != 0) {
    return InternalError(std::string("fcntl(F_SETFL): ") + ErrnoText(errno));
  }
  return Status::Ok();
}

std::string PeerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return FormatSockaddr(ss);
}

int PollTimeoutMs(TimePoint deadline) {
  const Duration left = deadline - Clock::now();
  if (left <= Duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

}  // namespace hora::net
