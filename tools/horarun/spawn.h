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
  int stdin_fd = -1;  // with `input`: the write end of its stdin
};

// Starts `argv` with environment `envs` ("NAME=value") as rank `rank`:
//  - in a process group of its own (its pgid is its pid), which it
//    announces on `announce_fd` (RankWatcher) before exec;
//  - killed by the kernel (SIGKILL) if horarun's thread dies first;
//  - with the signals of `blocked` unblocked;
//  - with stdout and stderr on pipes; stdin: when `input` is set, a pipe
//    that gets `input` and stays open until horarun closes stdin_fd
//    (remote ranks: the secret and the environment, RemoteInput in job.h,
//    and a sign that horarun is alive), else horarun's own stdin.
// Returns nullopt, after printing why, if it cannot start.
std::optional<RankProcess> SpawnRank(int rank, const std::vector<std::string>& argv,
                                     const std::vector<std::string>& envs, const sigset_t& blocked,
                                     const std::optional<std::string>& input, int announce_fd);

}  // namespace hora::horarun
