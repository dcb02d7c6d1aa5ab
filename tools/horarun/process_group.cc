// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "process_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>

namespace hora::horarun {
namespace {

// What getdents64 fills (glibc declares no type for the raw system call).
struct DirEntry {
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[1];
};

// Reads a decimal number at `*p`, moving past it.
long ReadNumber(const char** p) {
  long n = 0;
  bool negative = **p == '-';
  if (negative) ++*p;
  for (; **p >= '0' && **p <= '9'; ++*p) n = n * 10 + (**p - '0');
  return negative ? -n : n;
}

// The state letter of /proc/<name>/stat (under `proc`) when that process
// is in group `pgid` ('R', 'S', 'T', 'Z', ...), else 0.
char MemberState(int proc, const char* name, pid_t pgid) {
  char path[64];
  size_t len = 0;
  for (const char* s : {name, "/stat"}) {
    for (; *s != '\0' && len + 1 < sizeof path; ++s) path[len++] = *s;
  }
  path[len] = '\0';
  const int fd = openat(proc, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;  // gone meanwhile
  char stat[512];
  const ssize_t n = read(fd, stat, sizeof stat - 1);
  close(fd);
  if (n <= 0) return 0;
  stat[n] = '\0';
  // "pid (comm) state ppid pgrp ...": comm may hold spaces and ')'.
  const char* p = std::strrchr(stat, ')');
  if (p == nullptr || p[1] != ' ' || p[2] == '\0') return 0;
  const char state = p[2];
  p += 3;
  if (*p++ != ' ') return 0;
  ReadNumber(&p);  // ppid
  if (*p++ != ' ') return 0;
  return ReadNumber(&p) == pgid ? state : 0;
}

// Whether some member of `pgid` is in a state `wanted` accepts; `fallback`
// without /proc.
template <typename Wanted>
bool AnyMember(pid_t pgid, Wanted wanted, bool fallback) {
  const int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc < 0) return fallback;
  bool found = false;
  alignas(8) char buf[8192];
  for (long n; !found && (n = syscall(SYS_getdents64, proc, buf, sizeof buf)) > 0;) {
    for (long at = 0; !found && at < n;) {
      const char* name = buf + at + offsetof(DirEntry, name);
      at += reinterpret_cast<const DirEntry*>(buf + at)->reclen;
      if (name[0] >= '1' && name[0] <= '9') {
        const char state = MemberState(proc, name, pgid);
        found = state != 0 && wanted(state);
      }
    }
  }
  close(proc);
  return found;
}

}  // namespace

bool GroupHasLiveMember(pid_t pgid) {
  if (kill(-pgid, 0) != 0 && errno == ESRCH) return false;  // no member at all
  // (Without /proc, zombies cannot be told apart: live.)
  return AnyMember(
      pgid, [](char state) { return state != 'Z' && state != 'X'; }, true);
}

bool GroupHasStoppedMember(pid_t pgid) {
  return AnyMember(
      pgid, [](char state) { return state == 'T' || state == 't'; }, false);
}

void TerminateGroup(pid_t pgid) {
  kill(-pgid, SIGTERM);
  kill(-pgid, SIGCONT);
}

}  // namespace hora::horarun
