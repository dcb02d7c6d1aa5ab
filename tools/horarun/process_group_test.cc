// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "process_group.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace hora::horarun {
namespace {

// A child that waits in a process group of its own (it leads it).
pid_t StartGroup() {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    pause();
    _exit(0);
  }
  setpgid(pid, pid);
  return pid;
}

// Waits (bounded) until `pid`, a child, is a zombie, without reaping it.
bool WaitForZombie(pid_t pid) {
  siginfo_t info{};
  return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) == 0 && info.si_pid == pid;
}

TEST(ProcessGroup, LiveWhileAMemberRuns) {
  const pid_t leader = StartGroup();
  ASSERT_GT(leader, 0);
  EXPECT_TRUE(GroupHasLiveMember(leader));
  kill(leader, SIGKILL);
  ASSERT_TRUE(WaitForZombie(leader));
  // Only a zombie is left in the group (kill(-pgid, 0) still finds it).
  EXPECT_EQ(kill(-leader, 0), 0);
  EXPECT_FALSE(GroupHasLiveMember(leader));
  waitpid(leader, nullptr, 0);
  EXPECT_FALSE(GroupHasLiveMember(leader));
}

TEST(ProcessGroup, LiveWhileAMemberOutlivesItsLeader) {
  const pid_t leader = StartGroup();
  ASSERT_GT(leader, 0);
  const pid_t member = fork();
  if (member == 0) {
    setpgid(0, leader);
    pause();
    _exit(0);
  }
  ASSERT_GT(member, 0);
  setpgid(member, leader);
  kill(leader, SIGKILL);
  waitpid(leader, nullptr, 0);
  EXPECT_TRUE(GroupHasLiveMember(leader));
  kill(member, SIGKILL);
  ASSERT_TRUE(WaitForZombie(member));
  EXPECT_FALSE(GroupHasLiveMember(leader));
  waitpid(member, nullptr, 0);
}

// A group with a stopped member (kill -STOP of a frozen worker) is seen as
// stopped until it is continued.
TEST(ProcessGroup, AStoppedMemberIsSeen) {
  const pid_t leader = StartGroup();
  ASSERT_GT(leader, 0);
  EXPECT_FALSE(GroupHasStoppedMember(leader));
  kill(leader, SIGSTOP);
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(leader), &info, WSTOPPED | WNOWAIT), 0);
  EXPECT_TRUE(GroupHasStoppedMember(leader));
  EXPECT_TRUE(GroupHasLiveMember(leader));
  kill(leader, SIGCONT);
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(leader), &info, WCONTINUED), 0);
  EXPECT_FALSE(GroupHasStoppedMember(leader));
  kill(leader, SIGKILL);
  waitpid(leader, nullptr, 0);
  EXPECT_FALSE(GroupHasStoppedMember(leader));
}

}  // namespace
}  // namespace hora::horarun
