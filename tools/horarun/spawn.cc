// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "spawn.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include "watcher.h"

namespace hora::horarun {
namespace {

// In the child: says that `file` cannot run, without stdio or malloc.
void ReportExecFailure(const char* file, int error) {
  char line[512];
  size_t len = 0;
  for (const char* part : {"horarun: cannot run '", file, "': ", strerrordesc_np(error), "\n"}) {
    if (part == nullptr) part = "unknown error";
    for (; *part != '\0' && len < sizeof line; ++part) line[len++] = *part;
  }
  (void)!write(STDERR_FILENO, line, len);
}

}  // namespace

InputProgress FeedInput(int fd, const std::string& input, size_t* done, std::string* error) {
  // EPIPE (the rank already gone) is reported, and its exit seen by the
  // caller; SIGPIPE is held back around the write and a pending one
  // discarded.
  sigset_t pipe_signal, old_mask;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, &old_mask);
  InputProgress progress = InputProgress::kPending;
  while (*done < input.size()) {
    const ssize_t n = write(fd, input.data() + *done, input.size() - *done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;  // the pipe is full
    if (n <= 0) {
      *error = std::strerror(n < 0 ? errno : EPIPE);
      const timespec now{0, 0};
      (void)sigtimedwait(&pipe_signal, nullptr, &now);
      progress = InputProgress::kFailed;
      break;
    }
    *done += static_cast<size_t>(n);
  }
  if (*done >= input.size()) progress = InputProgress::kDone;
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  return progress;
}

std::optional<RankProcess> SpawnRank(int rank, const std::vector<std::string>& argv,
                                     const std::vector<std::string>& envs, const sigset_t& blocked,
                                     RankInput input, int announce_fd) {
  const bool with_input = input == RankInput::kPipe;
  int out[2] = {-1, -1}, err[2] = {-1, -1}, in[2] = {-1, -1};
  int null_fd = -1;
  auto close_all = [&] {  // (on a failure: nothing is left open)
    for (int fd : {out[0], out[1], err[0], err[1], in[0], in[1], null_fd}) {
      if (fd >= 0) close(fd);
    }
  };
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
      (with_input && pipe2(in, O_CLOEXEC) != 0)) {
    std::fprintf(stderr, "horarun: pipe for rank %d: %s\n", rank, std::strerror(errno));
    close_all();
    return std::nullopt;
  }
  if (input == RankInput::kNone && (null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
    std::fprintf(stderr, "horarun: /dev/null for rank %d: %s\n", rank, std::strerror(errno));
    close_all();
    return std::nullopt;
  }
  // Everything the child needs is built here: between fork and exec a child
  // of this multi-threaded process may only make async-signal-safe calls.
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "horarun: fork for rank %d: %s\n", rank, std::strerror(errno));
    close_all();
    return std::nullopt;
  }
  if (pid == 0) {
    setpgid(0, 0);                         // its own group: we signal the whole tree
    AnnounceGroup(announce_fd, getpid());  // before any of the rank's code runs
    prctl(PR_SET_PDEATHSIG, SIGKILL);      // horarun gone -> rank gone
    if (getppid() != parent) _exit(127);   // horarun died before prctl took effect
    sigprocmask(SIG_UNBLOCK, &blocked, nullptr);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    if (with_input) dup2(in[0], STDIN_FILENO);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    execvpe(cargv[0], cargv.data(), cenv.data());
    ReportExecFailure(cargv[0], errno);
    _exit(127);
  }
  setpgid(pid, pid);
  close(out[1]);
  close(err[1]);
  if (null_fd >= 0) close(null_fd);
  RankProcess p;
  p.pid = pid;
  p.out_fd = out[0];
  p.err_fd = err[0];
  if (with_input) {
    close(in[0]);
    // The caller feeds it (FeedInput): a remote shell that is slow to read
    // must not hold up the next rank's start.
    fcntl(in[1], F_SETFL, fcntl(in[1], F_GETFL) | O_NONBLOCK);
    p.stdin_fd = in[1];
  }
  return p;
}

}  // namespace hora::horarun
