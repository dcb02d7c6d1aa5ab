// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// hora-tcp-floor: the floor under a small TCP exchange on this host, and
// what an idle watcher thread costs it. Two processes over loopback; each
// iteration both send BYTES and spin on a nonblocking recv() until the
// peer's BYTES are in: the exchange of a 2-rank allreduce, with nothing
// else. With --watcher, each process also has a thread asleep in
// epoll_wait() on its socket with that interest (edge-triggered, as the TCP
// transport's I/O thread is); it reads nothing, so any difference is its
// wake-ups alone. --claim clears the watcher's interest around each
// receive (epoll_ctl before and after), as a waiter claiming the socket
// would. Prints the p50 and p99 exchange time of process 0.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr char kUsage[] =
    "usage: hora-tcp-floor [--iters N] [--bytes B] [--watcher none|in|out|inout] [--claim]\n"
    "Two processes exchange B bytes (default 4) over loopback TCP N times (default\n"
    "20000, after 200 warm-up), spinning on recv(); prints p50 and p99 in us. --watcher\n"
    "adds an idle thread per process in epoll_wait() on the socket with that interest\n"
    "(edge-triggered); --claim clears its interest around each receive.\n";

struct Options {
  long iters = 20000;
  size_t bytes = 4;
  uint32_t watch = 0;  // epoll interest of the watcher; 0: no watcher
  bool claim = false;
};

bool Parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--iters" && has_value) {
      o->iters = std::atol(argv[++i]);
      if (o->iters < 1) return false;
    } else if (a == "--bytes" && has_value) {
      const long b = std::atol(argv[++i]);
      if (b < 1 || b > (1 << 20)) return false;
      o->bytes = static_cast<size_t>(b);
    } else if (a == "--watcher" && has_value) {
      const std::string w = argv[++i];
      if (w == "none") {
        o->watch = 0;
      } else if (w == "in") {
        o->watch = EPOLLIN;
      } else if (w == "out") {
        o->watch = EPOLLOUT;
      } else if (w == "inout") {
        o->watch = EPOLLIN | EPOLLOUT;
      } else {
        return false;
      }
    } else if (a == "--claim") {
      o->claim = true;
    } else {
      return false;
    }
  }
  return !o->claim || o->watch != 0;
}

bool Fail(const char* what) {
  std::fprintf(stderr, "hora-tcp-floor: %s: %s\n", what, std::strerror(errno));
  return false;
}

bool SendAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno != EAGAIN && errno != EINTR) return Fail("send");
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
    }
  }
  return true;
}

bool RecvAll(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = recv(fd, p, n, 0);
    if (r == 0) {
      std::fprintf(stderr, "hora-tcp-floor: the peer closed\n");
      return false;
    }
    if (r < 0 && errno != EAGAIN && errno != EINTR) return Fail("recv");
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
    }
  }
  return true;
}

bool SetInterest(int ep, int fd, int op, uint32_t events) {
  epoll_event ev{};
  ev.events = events | EPOLLET;
  return epoll_ctl(ep, op, fd, &ev) == 0 || Fail("epoll_ctl");
}

// One side of the exchange; process 0 prints. Returns the exit status.
int Exchange(int fd, int rank, const Options& o) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0) return Fail("fcntl"), 1;
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return Fail("epoll_create1"), 1;
  std::atomic<bool> stop{false};
  std::thread watcher;
  if (o.watch != 0) {
    if (!SetInterest(ep, fd, EPOLL_CTL_ADD, o.watch)) return 1;
    watcher = std::thread([&] {
      epoll_event events[4];
      while (!stop.load()) epoll_wait(ep, events, 4, 100);
    });
  }
  constexpr long kWarmup = 200;
  std::vector<char> out(o.bytes, static_cast<char>(rank)), in(o.bytes);
  std::vector<double> us;
  us.reserve(static_cast<size_t>(o.iters));
  bool ok = true;
  for (long i = 0; ok && i < kWarmup + o.iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    ok = SendAll(fd, out.data(), out.size());
    if (ok && o.claim) ok = SetInterest(ep, fd, EPOLL_CTL_MOD, 0);
    ok = ok && RecvAll(fd, in.data(), in.size());
    if (ok && o.claim) ok = SetInterest(ep, fd, EPOLL_CTL_MOD, EPOLLIN);
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= kWarmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  stop = true;
  if (watcher.joinable()) watcher.join();
  close(ep);
  if (!ok) return 1;
  std::sort(us.begin(), us.end());
  if (rank == 0) {
    std::printf("%zu B exchange over loopback TCP, %ld iterations: p50 %.1f us, p99 %.1f us\n",
                o.bytes, o.iters, us[us.size() / 2], us[us.size() * 99 / 100]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  Options o;
  if (!Parse(argc, argv, &o)) {
    std::fprintf(stderr, "hora-tcp-floor: bad arguments\n%s", kUsage);
    return 2;
  }
  const int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (ls < 0 || bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(ls, 1) != 0 || getsockname(ls, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Fail("listen"), 1;
  }
  const pid_t child = fork();
  if (child < 0) return Fail("fork"), 1;
  if (child == 0) {
    close(ls);
    const int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c < 0 || connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      Fail("connect");
      _exit(1);
    }
    _exit(Exchange(c, 1, o));
  }
  const int s = accept(ls, nullptr, nullptr);
  if (s < 0) return Fail("accept"), 1;
  const int rc = Exchange(s, 0, o);
  close(s);  // (the child, if still exchanging, fails on the closed peer)
  int status = 0;
  waitpid(child, &status, 0);
  return rc != 0 ? rc : (WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}
