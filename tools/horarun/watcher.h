// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Stops the local ranks' process groups when horarun dies, however it dies
// (SIGKILL included), so that no process of the job is left running.
//
// A rank's kernel-level link to horarun, PR_SET_PDEATHSIG, reaches only the
// rank's own process (often a shell), not the processes it started. So
// before any rank starts, horarun forks a watcher: a small process in a
// session of its own (a signal to horarun's process group, such as Ctrl-C
// or `kill -- -PGID`, does not reach it), joined to horarun by a socket
// whose only other end horarun holds. Each rank tells the watcher its
// process-group id itself, between fork and exec, before any of its own
// code runs (AnnounceGroup); horarun tells it when a group has ended
// (Forget). When the socket reaches end of file without horarun's "done"
// message (horarun is gone), the watcher sends SIGTERM to every group it
// knows, SIGKILL to what is left after the grace period, and exits. On a
// normal end horarun sends "done" and waits for the watcher to exit.
//
// Remote ranks have a watcher of their own on their host (job.cc's
// RemoteScript); horarun's local rsh processes are ranks here.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

namespace hora::horarun {

class RankWatcher {
 public:
  // Forks the watcher. `max_groups`: how many ranks may announce a group;
  // `grace_s`: from SIGTERM to SIGKILL. Call with horarun's signals blocked
  // (the watcher resets its own mask) and before any rank's pipes exist (it
  // closes every inherited descriptor but stderr, which it writes one line
  // to when it stops the ranks). Returns null, after filling `error`, if
  // the watcher cannot start.
  static std::unique_ptr<RankWatcher> Start(size_t max_groups, double grace_s, std::string* error);

  // Tells the watcher the job is done, and waits until it has exited.
  ~RankWatcher();
  RankWatcher(const RankWatcher&) = delete;
  RankWatcher& operator=(const RankWatcher&) = delete;

  // The descriptor a rank announces its group on (close-on-exec).
  int announce_fd() const { return fd_; }

  // Group `pgid` has no member left (or was killed): the watcher forgets it,
  // so that it never signals a later group that reuses the id.
  void Forget(pid_t pgid);

 private:
  RankWatcher(pid_t pid, int fd) : pid_(pid), fd_(fd) {}

  pid_t pid_;
  int fd_;
};

// In a rank between fork and exec: tells the watcher on `fd` the rank's
// process group. Async-signal-safe; a watcher that is gone is ignored.
void AnnounceGroup(int fd, pid_t pgid);

}  // namespace hora::horarun
