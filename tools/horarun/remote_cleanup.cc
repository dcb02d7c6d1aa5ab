// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "remote_cleanup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "job.h"

namespace hora::horarun {

std::vector<std::string> RemoteShmCleanupCommand(const std::vector<std::string>& rsh,
                                                 const std::string& host,
                                                 const std::string& job_id) {
  return RshCommand(rsh, host, "rm -f /dev/shm/hora-" + job_id + "-*");
}

int RemoveRemoteShmSegments(const std::vector<std::string>& rsh,
                            const std::vector<std::string>& hosts, const std::string& job_id,
                            double timeout_s) {
  std::vector<pid_t> pids;
  for (const std::string& host : hosts) {
    const std::vector<std::string> argv = RemoteShmCleanupCommand(rsh, host, job_id);
    std::vector<char*> cargv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      const int null = open("/dev/null", O_RDWR);
      if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
      }
      execvp(cargv[0], cargv.data());
      _exit(127);
    }
    if (pid > 0) pids.push_back(pid);
  }
  int failed = static_cast<int>(hosts.size() - pids.size());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (pid_t pid : pids) {
    int status = 0;
    pid_t got = 0;
    while ((got = waitpid(pid, &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (got == 0) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      ++failed;
    } else if (got < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
    }
  }
  return failed;
}

}  // namespace hora::horarun
