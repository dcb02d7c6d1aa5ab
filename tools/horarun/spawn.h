// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Starts one rank's process (fork and exec) for RunJob.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace hora::horarun {

struct RankProcess {
  pid_t pid = -1;
  int out_fd = -1;    // read end of its stdout
  int err_fd = -1;    // read end of its stderr
  int stdin_fd = -1;  // with an input: the write end of its stdin, nonblocking
};

// Starts `argv` with environment `envs` ("NAME=value") as rank `rank`:
//  - in a process group of its own (its pgid is its pid), which it
//    announces on `announce_fd` (RankWatcher) before exec;
//  - killed by the kernel (SIGKILL) if horarun's thread dies first;
//  - with the signals of `blocked` unblocked;
//  - with stdout and stderr on pipes; stdin: with RankInput::kPipe, a pipe
//    whose nonblocking write end (stdin_fd) the caller feeds with
//    FeedInput and keeps open until it closes it (remote ranks: the secret
//    and the environment, RemoteInput in job.h, then a sign that horarun
//    is alive); kHorarunsStdin: horarun's own (as mpirun, the first local
//    rank's only); kNone: /dev/null.
// Returns nullopt, after printing why, if it cannot start.
enum class RankInput { kPipe, kHorarunsStdin, kNone };
std::optional<RankProcess> SpawnRank(int rank, const std::vector<std::string>& argv,
                                     const std::vector<std::string>& envs, const sigset_t& blocked,
                                     RankInput input, int announce_fd);

// Writes to the nonblocking `fd` what it takes of `input` from `*done` on,
// advancing `*done`, without waiting: a pipe holds 64 KiB, and a larger
// input (a remote rank's environment) goes as the remote shell reads it.
// kFailed (with `*error`) when the reader is gone.
enum class InputProgress { kPending, kDone, kFailed };
InputProgress FeedInput(int fd, const std::string& input, size_t* done, std::string* error);

}  // namespace hora::horarun
