// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "death_watch.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace hora::horarun {
namespace {

// A child that waits until it is killed, or exits with `code` on SIGUSR1.
pid_t StartChild(int code) {
  const pid_t pid = fork();
  if (pid == 0) {
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    int sig = 0;
    sigwait(&usr1, &sig);
    _exit(code);
  }
  return pid;
}

// Waits until child `pid` is a zombie, without reaping it.
void WaitForZombie(pid_t pid) {
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);
}

TEST(DeathWatch, ReportsDeathsInTheOrderTheyHappened) {
  // The children die one after another, all before the first TakeDeaths:
  // waitpid(-1) would report them in the order they were forked. Those
  // killed come first, each kind in the order it died.
  sigset_t usr1, old;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, &old);  // the children wait for it
  std::vector<int> order = {2, 0, 3, 1};
  do {
    DeathWatch watch;
    std::vector<pid_t> pids;
    for (int i = 0; i < 4; ++i) {
      pids.push_back(StartChild(10 + i));
      ASSERT_GT(pids.back(), 0);
      watch.Add(pids.back());
    }
    EXPECT_TRUE(watch.TakeDeaths().empty());
    std::vector<pid_t> killed, exited;
    for (int i : order) {
      // Even ranks exit with a code, odd ones are killed.
      kill(pids[static_cast<size_t>(i)], i % 2 == 0 ? SIGUSR1 : SIGKILL);
      WaitForZombie(pids[static_cast<size_t>(i)]);
      (i % 2 == 0 ? exited : killed).push_back(pids[static_cast<size_t>(i)]);
    }
    std::vector<pid_t> expected = killed;
    expected.insert(expected.end(), exited.begin(), exited.end());
    pollfd pfd{watch.fd(), POLLIN, 0};
    EXPECT_EQ(poll(&pfd, 1, 0), 1);
    const std::vector<Death> deaths = watch.TakeDeaths();
    std::vector<pid_t> got;
    for (const Death& d : deaths) got.push_back(d.pid);
    EXPECT_EQ(got, expected);
    for (const Death& d : deaths) {
      const size_t i =
          static_cast<size_t>(std::find(pids.begin(), pids.end(), d.pid) - pids.begin());
      if (i % 2 == 0) {
        EXPECT_TRUE(WIFEXITED(d.status) && WEXITSTATUS(d.status) == static_cast<int>(10 + i));
      } else {
        EXPECT_TRUE(WIFSIGNALED(d.status) && WTERMSIG(d.status) == SIGKILL);
      }
    }
    EXPECT_TRUE(watch.TakeDeaths().empty());
    for (pid_t pid : pids) {  // still zombies: taking a death reaps nothing
      EXPECT_EQ(waitpid(pid, nullptr, WNOHANG), pid);
    }
  } while (std::next_permutation(order.begin(), order.end()) && order[0] == 2);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

TEST(DeathWatch, WatchesAChildThatIsAlreadyDead) {
  const pid_t pid = fork();
  if (pid == 0) _exit(3);
  ASSERT_GT(pid, 0);
  WaitForZombie(pid);
  DeathWatch watch;
  watch.Add(pid);
  const std::vector<Death> deaths = watch.TakeDeaths();
  ASSERT_EQ(deaths.size(), 1u);
  EXPECT_EQ(deaths[0].pid, pid);
  EXPECT_TRUE(WIFEXITED(deaths[0].status));
  EXPECT_EQ(WEXITSTATUS(deaths[0].status), 3);
  EXPECT_EQ(waitpid(pid, nullptr, 0), pid);
}

}  // namespace
}  // namespace hora::horarun
