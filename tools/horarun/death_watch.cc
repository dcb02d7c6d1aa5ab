// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "death_watch.h"

#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace hora::horarun {
namespace {

// The wait status that waitpid would give for a death waitid reported.
int WaitStatus(const siginfo_t& info) {
  if (info.si_code == CLD_EXITED) return W_EXITCODE(info.si_status, 0);
  return W_EXITCODE(0, info.si_status) | (info.si_code == CLD_DUMPED ? WCOREFLAG : 0);
}

}  // namespace

DeathWatch::DeathWatch() : epoll_fd_(epoll_create1(EPOLL_CLOEXEC)) {}

DeathWatch::~DeathWatch() {
  for (const Watched& w : watched_) {
    if (w.pidfd >= 0) close(w.pidfd);
  }
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

void DeathWatch::Add(pid_t pid) {
  int pidfd = -1;
  if (epoll_fd_ >= 0) {
    pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));  // close-on-exec
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = static_cast<uint64_t>(pid);
    if (pidfd >= 0 && epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, pidfd, &event) != 0) {
      close(pidfd);
      pidfd = -1;
    }
  }
  watched_.push_back({pid, pidfd});
}

std::vector<Death> DeathWatch::TakeDeaths() {
  std::vector<Death> deaths;
  // Takes watched_[i] if it has died (without reaping it).
  auto take = [&](size_t i) {
    const Watched w = watched_[i];
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(w.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
        info.si_pid != w.pid) {
      return false;
    }
    deaths.push_back({w.pid, WaitStatus(info)});
    if (w.pidfd >= 0) close(w.pidfd);  // leaves the epoll set
    watched_.erase(watched_.begin() + static_cast<std::ptrdiff_t>(i));
    return true;
  };
  if (epoll_fd_ >= 0 && !watched_.empty()) {
    std::vector<epoll_event> ready(watched_.size());
    const int n = epoll_wait(epoll_fd_, ready.data(), static_cast<int>(ready.size()), 0);
    for (int k = 0; k < n; ++k) {  // in the order they died
      const auto pid = static_cast<pid_t>(ready[static_cast<size_t>(k)].data.u64);
      for (size_t i = 0; i < watched_.size(); ++i) {
        if (watched_[i].pid == pid && watched_[i].pidfd >= 0) {
          take(i);
          break;
        }
      }
    }
  }
  for (size_t i = 0; i < watched_.size();) {
    if (watched_[i].pidfd >= 0 || !take(i)) ++i;
  }
  // Deaths by a signal first (see the header), each kind in its order.
  std::stable_partition(deaths.begin(), deaths.end(),
                        [](const Death& d) { return WIFSIGNALED(d.status); });
  return deaths;
}

}  // namespace hora::horarun
