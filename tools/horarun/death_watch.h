// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The ranks' deaths, in the order they happened.
//
// Why the order needs care: when one rank is killed, its peers fail a few
// milliseconds later with errors naming it, and horarun must name the rank
// that failed first. Deaths close together are often found in one round of
// horarun's loop (or while horarun was descheduled), and then neither
// helps: waitpid(-1) reports zombies in the order the children were
// forked, and one pending SIGCHLD stands for any number of deaths.
//
// How: a pidfd per rank, all in one epoll set. A pidfd becomes readable as
// its process becomes a zombie, which the kernel does one death at a time
// (under its task-list lock), waking epoll there and then; and epoll keeps
// its ready list first in, first out (fs/eventpoll.c appends a file as it
// becomes ready, and keeps that order for files that become ready while
// epoll_wait is copying events out). So one epoll_wait returns the deaths
// in the order they happened, however late horarun asks. That order is how
// Linux's epoll is written, not a promise of its manual page.
//
// Deaths found together are then ordered by what their status shows:
// deaths by a signal first, each kind in the order they died. A killed
// process closes its files (its connections, a pipe) before the kernel
// records its death, and a peer that sees them close can exit, with an
// error code naming the killed rank, before that record is made (seen
// under load: the peer's pidfd came first). A rank killed is the likelier
// cause. Where a pidfd cannot be had (Linux before 5.3, a seccomp filter),
// the order within each kind is the order the processes were added.
#pragma once

#include <sys/types.h>

#include <vector>

namespace hora::horarun {

struct Death {
  pid_t pid;
  int status;  // as from waitpid
};

class DeathWatch {
 public:
  DeathWatch();
  ~DeathWatch();
  DeathWatch(const DeathWatch&) = delete;
  DeathWatch& operator=(const DeathWatch&) = delete;

  // Watches `pid`: a child of this process, not reaped yet (a zombie is
  // fine).
  void Add(pid_t pid);

  // Readable (poll) when a watched process may have died. Processes watched
  // without a pidfd wake nothing: poll with a timeout, or on SIGCHLD.
  int fd() const { return epoll_fd_; }

  // The watched processes that have died since the last call: deaths by
  // a signal first, each kind in the order they died (those without a
  // pidfd after those with one, as above); they are watched no more. Never waits, and reaps
  // nothing: each stays a zombie until the caller reaps it, and so keeps its pid, and its process
  // group's id, from being reused (the kernel frees an id only once no process, zombies included,
  // has it as its pid, group or session).
  std::vector<Death> TakeDeaths();

 private:
  struct Watched {
    pid_t pid;
    int pidfd;  // -1: none
  };

  int epoll_fd_;
  std::vector<Watched> watched_;
};

}  // namespace hora::horarun
