// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "watcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "process_group.h"

namespace hora::horarun {
namespace {

// One message on the watcher's socket (SOCK_SEQPACKET: one send, one
// message, whichever process sent it).
struct Message {
  enum Kind : int32_t { kAnnounce = 1, kForget = 2, kDone = 3 };
  int32_t kind;
  int32_t pgid;
};

void Send(int fd, Message m) {
  while (send(fd, &m, sizeof m, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

double Now() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Appends `text` at `*at` within [*at, end); for messages built without
// allocating.
void Append(char** at, char* end, const char* text) {
  while (*text != '\0' && *at < end) *(*at)++ = *text++;
}

void AppendNumber(char** at, char* end, long n) {
  char digits[24];
  int len = 0;
  do {
    digits[len++] = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n > 0 && len < 23);
  while (len > 0 && *at < end) *(*at)++ = digits[--len];
}

// Leaves open only stdin and stdout (made /dev/null), stderr, and the
// socket (moved to descriptor 3).
int KeepOnly(int fd) {
  const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
  }
  if (fd != 3) {
    dup2(fd, 3);
    fd = 3;
  }
  if (syscall(SYS_close_range, 4U, ~0U, 0U) != 0) {
    rlimit limit{};
    const int max = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < 65536
                        ? static_cast<int>(limit.rlim_cur)
                        : 65536;
    for (int i = 4; i < max; ++i) close(i);
  }
  return fd;
}

// The watcher process. `groups` has its capacity reserved: nothing here
// allocates (a forked child of a multi-threaded process).
[[noreturn]] void Watch(int fd, std::vector<pid_t>& groups, double grace_s, pid_t horarun) {
  setsid();
  prctl(PR_SET_NAME, "horarun-watch");
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_IGN);  // stderr may be a pipe nobody reads any more
  fd = KeepOnly(fd);
  for (;;) {
    Message m{};
    const ssize_t n = recv(fd, &m, sizeof m, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // end of file (or a broken socket): horarun is gone
    if (n != sizeof m) continue;
    if (m.kind == Message::kDone) _exit(0);
    if (m.kind == Message::kAnnounce && groups.size() < groups.capacity()) {
      groups.push_back(m.pgid);
    } else if (m.kind == Message::kForget) {
      for (size_t i = 0; i < groups.size(); ++i) {
        if (groups[i] == m.pgid) {
          groups[i] = groups.back();
          groups.pop_back();
          break;
        }
      }
    }
  }
  if (groups.empty()) _exit(0);
  char line[160];
  char* at = line;
  char* end = line + sizeof line;
  Append(&at, end, "horarun's watcher: horarun (pid ");
  AppendNumber(&at, end, horarun);
  Append(&at, end, ") is gone; stopping its ");
  AppendNumber(&at, end, static_cast<long>(groups.size()));
  Append(&at, end, " local rank(s)\n");
  (void)!write(STDERR_FILENO, line, static_cast<size_t>(at - line));
  for (pid_t g : groups) TerminateGroup(g);
  const double kill_at = Now() + grace_s;
  while (!groups.empty()) {
    for (size_t i = 0; i < groups.size();) {
      if (!GroupHasLiveMember(groups[i])) {
        groups[i] = groups.back();
        groups.pop_back();
      } else {
        ++i;
      }
    }
    if (Now() >= kill_at) {
      for (pid_t g : groups) kill(-g, SIGKILL);
      break;
    }
    const timespec step{0, 50 * 1000 * 1000};
    nanosleep(&step, nullptr);
  }
  _exit(0);
}

}  // namespace

std::unique_ptr<RankWatcher> RankWatcher::Start(size_t max_groups, double grace_s,
                                                std::string* error) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    *error = std::string("cannot start the rank watcher: socketpair: ") + std::strerror(errno);
    return nullptr;
  }
  std::vector<pid_t> groups;
  groups.reserve(max_groups);
  const pid_t horarun = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("cannot start the rank watcher: fork: ") + std::strerror(errno);
    close(sv[0]);
    close(sv[1]);
    return nullptr;
  }
  if (pid == 0) {
    close(sv[0]);
    Watch(sv[1], groups, grace_s, horarun);
  }
  close(sv[1]);
  return std::unique_ptr<RankWatcher>(new RankWatcher(pid, sv[0]));
}

RankWatcher::~RankWatcher() {
  Send(fd_, {Message::kDone, 0});
  close(fd_);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

void RankWatcher::Forget(pid_t pgid) { Send(fd_, {Message::kForget, pgid}); }

void AnnounceGroup(int fd, pid_t pgid) { Send(fd, {Message::kAnnounce, pgid}); }

}  // namespace hora::horarun
