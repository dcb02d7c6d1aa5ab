// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Small POSIX socket helpers shared by the TCP store and the TCP transport.
//
// Every call that can block takes a deadline or a timeout: nothing here waits
// forever. SendAll/RecvAll work on blocking and nonblocking descriptors alike
// (they never block inside send/recv; they poll() up to the deadline).
// Errors name the address and the system's reason, e.g.
//   "could not connect to 10.0.0.5:29500 within 30 s: Connection refused".
//
// Addresses are numeric or host names, IPv4 or IPv6. IPv6 literals are written
// in brackets when a port follows: "[::1]:29500".
//
// Thread-safety: free functions are thread-safe; an Fd is a value owned by one
// thread at a time.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "hora/status.h"

namespace hora::net {

// Owns a file descriptor and closes it on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(Fd&& other) noexcept : fd_(other.Release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) Reset(other.Release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership without closing; returns the descriptor.
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Closes the owned descriptor (if any) and takes ownership of `fd`.
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct HostPort {
  std::string host;  // name or numeric address, IPv6 without brackets
  uint16_t port = 0;

  // "host:port", or "[v6addr]:port" when the host contains ':'.
  std::string ToString() const;
};

// Parses "host:port", "1.2.3.4:5" or "[::1]:5". The port must be 1..65535;
// an unbracketed IPv6 address is rejected (ambiguous). Errors quote the text.
Result<HostPort> ParseHostPort(std::string_view text);

// Opens a listening TCP socket (SO_REUSEADDR, close-on-exec) on `bind_host`
// ("" / "*" / "::" = every interface, dual-stack when IPv6 exists; brackets
// around an IPv6 address are accepted) and `port` (0 = an ephemeral port; see
// LocalPort). The socket is nonblocking, so that Accept() never blocks past
// its deadline, and fits a poll() loop as it is.
Result<Fd> Listen(const std::string& bind_host, uint16_t port, int backlog);

// The local port a socket is bound to.
Result<uint16_t> LocalPort(const Fd& fd);

// Accepts one connection on the nonblocking `listen_fd` (as Listen makes it),
// waiting up to `deadline` (a deadline in the past tries once). The new socket is nonblocking,
// close-on-exec, with TCP_NODELAY (and Reno within the host, as Connect). Fails with Timeout when
// nothing arrived. `peer`, when given,
// receives the client's address as "1.2.3.4:5" / "[::1]:5".
Result<Fd> Accept(int listen_fd, TimePoint deadline, std::string* peer = nullptr);

// Connects to `addr`, retrying refused/unreachable/timed-out attempts with a
// short backoff until `timeout` has passed; then fails with Unavailable naming
// host:port and the last reason. Name resolution failures other than
// "try again" fail at once (InvalidArgument). The socket is blocking,
// close-on-exec, with TCP_NODELAY, and Reno congestion control within the
// host (WithinHost). Name resolution itself (getaddrinfo) is not
// interruptible; numeric addresses never block in it.
Result<Fd> Connect(const HostPort& addr, Duration timeout);

// Whether a connection between these two ends stays within this host: the
// peer is a loopback address (127.0.0.0/8, ::1), or the same address as this
// end (traffic to one's own address goes through loopback too). Such a
// connection gets Reno congestion control (Connect, Accept): there is no
// network to share, and a system default of BBR paces loopback traffic,
// which reorders it (fast retransmits) and halved Hora's allreduce of 1 MiB
// at np 2 (docs/dev/performance.md, session 59).
bool WithinHost(const sockaddr_storage& local, const sockaddr_storage& peer);

// WithinHost of the connected stream `fd`'s two ends; false where either
// cannot be read (a connection whose peer is gone counts as leaving the host).
bool StreamWithinHost(int fd);

// Sends all `n` bytes, or fails: Timeout at `deadline`, Unavailable when the
// peer closed or reset the connection. Never raises SIGPIPE.
Status SendAll(int fd, const void* data, size_t n, TimePoint deadline);

// Receives exactly `n` bytes, or fails: Timeout at `deadline`, Unavailable
// "connection closed by peer" when the stream ends first.
Status RecvAll(int fd, void* data, size_t n, TimePoint deadline);

// Sets or clears O_NONBLOCK.
Status SetNonBlocking(int fd, bool nonblocking);

// The remote address of a connected socket, "1.2.3.4:5" or "[::1]:5"
// (IPv4-mapped IPv6 addresses are shown as IPv4); "?" if unknown.
std::string PeerAddress(int fd);

// Milliseconds from now until `deadline`, rounded up, clamped to [0, INT_MAX]:
// the timeout argument of poll().
int PollTimeoutMs(TimePoint deadline);

}  // namespace hora::net
