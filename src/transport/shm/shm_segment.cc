// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/shm/shm_segment.h"

#include "common/process_alive.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace hora {
namespace {

constexpr size_t kMaxJobIdLength = 200;

std::string Errno(const std::string& what, const std::string& name, int err) {
  return what + " shared-memory segment " + name + ": " + std::strerror(err);
}

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// True for the suffixes the transport uses: "<src>-<dst>", "bell-<rank>",
// "win-<rank>" and "set<key>-win-<rank>", after "s<session>-" (the process's n-th Session of the
// job) and "g<first rank>-" (a host's group in a job spanning hosts), each
// optional, and before "-p<pid>" (the creating process), optional.
bool IsTransportSuffix(std::string s) {
  for (char lead : {'s', 'g'}) {
    if (s.size() > 1 && s[0] == lead) {
      const size_t dash = s.find('-');
      if (dash != std::string::npos && AllDigits(s.substr(1, dash - 1))) s = s.substr(dash + 1);
    }
  }
  // A process set's windows: "set<key>-win-<rank>".
  if (const size_t dash = s.find('-');
      s.rfind("set", 0) == 0 && dash != std::string::npos && AllDigits(s.substr(3, dash - 3))) {
    s = s.substr(dash + 1);
  }
  if (const size_t n = s.rfind("-n"); n != std::string::npos && AllDigits(s.substr(n + 2))) {
    s = s.substr(0, n);
  }
  if (const size_t p = s.rfind("-p"); p != std::string::npos && AllDigits(s.substr(p + 2))) {
    s = s.substr(0, p);
  }
  if (s.rfind("bell-", 0) == 0) return AllDigits(s.substr(5));
  if (s.rfind("win-", 0) == 0) return AllDigits(s.substr(4));
  size_t dash = s.find('-');
  return dash != std::string::npos && AllDigits(s.substr(0, dash)) && AllDigits(s.substr(dash + 1));
}

Result<void*> MapFd(int fd, const std::string& name, size_t bytes, bool populate) {
  // MAP_POPULATE (unless `populate` is false): every page is mapped now, on
  // both sides. Left to first touch, each 4 KiB of a slot faulted the first
  // time a message reached it (microseconds apiece on a virtual machine).
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | (populate ? MAP_POPULATE : 0),
                 fd, 0);
  if (p == MAP_FAILED) return UnavailableError(Errno("cannot map", name, errno));
  return p;
}

}  // namespace

ShmSegment::~ShmSegment() { Reset(); }

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : name_(std::move(other.name_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      owns_name_(std::exchange(other.owns_name_, false)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    Reset();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owns_name_ = std::exchange(other.owns_name_, false);
  }
  return *this;
}

void ShmSegment::Reset() {
  (void)Unlink();
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

Result<ShmSegment> ShmSegment::Create(const std::string& name, size_t bytes, bool populate) {
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = errno;
    std::string hint = err == EEXIST ? " (a job with the same id is running, or a crashed run left "
                                       "it behind: horarun removes those)"
                                     : "";
    return UnavailableError(Errno("cannot create", name, err) + hint);
  }
  ShmSegment seg;
  seg.name_ = name;
  seg.owns_name_ = true;  // from here on, an early return unlinks it
  // The umask can only clear bits; fchmod makes the mode exactly 0600.
  if (fchmod(fd, 0600) != 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    close(fd);
    return UnavailableError(Errno("cannot size (" + std::to_string(bytes) + " bytes)", name, err));
  }
  // Reserve the memory now: on a full /dev/shm (a container's 64 MiB, say)
  // this fails here with a clear error instead of a SIGBUS at first touch.
  if (int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
    close(fd);
    return UnavailableError(
        Errno("cannot reserve " + std::to_string(bytes) + " bytes for", name, err) +
        " (is /dev/shm full?)");
  }
  Result<void*> p = MapFd(fd, name, bytes, populate);
  close(fd);
  if (!p.ok()) return p.status();
  seg.data_ = *p;
  seg.size_ = bytes;
  return seg;
}

Result<ShmSegment> ShmSegment::Open(const std::string& name, size_t bytes, bool populate) {
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return UnavailableError(Errno("cannot open", name, errno));
  struct stat st {};
  std::string problem;
  if (fstat(fd, &st) != 0) {
    problem = std::strerror(errno);
  } else if (st.st_uid != geteuid()) {
    problem = "owned by uid " + std::to_string(st.st_uid) + ", not by this user";
  } else if ((st.st_mode & 0777) != 0600) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 0777));
    problem = std::string("mode ") + mode + ", expected 600";
  } else if (static_cast<size_t>(st.st_size) != bytes) {
    problem = "size " + std::to_string(st.st_size) + " bytes, expected " + std::to_string(bytes);
  }
  if (!problem.empty()) {
    close(fd);
    return UnavailableError("refusing shared-memory segment " + name + ": " + problem);
  }
  Result<void*> p = MapFd(fd, name, bytes, populate);
  close(fd);
  if (!p.ok()) return p.status();
  ShmSegment seg;
  seg.name_ = name;
  seg.data_ = *p;
  seg.size_ = bytes;
  return seg;
}

Status ShmSegment::Unlink() {
  if (!owns_name_) return Status::Ok();
  owns_name_ = false;
  if (shm_unlink(name_.c_str()) != 0 && errno != ENOENT) {
    return UnavailableError(Errno("cannot unlink", name_, errno));
  }
  return Status::Ok();
}

Status ValidateShmJobId(const std::string& job_id) {
  bool ok = !job_id.empty() && job_id.size() <= kMaxJobIdLength &&
            std::all_of(job_id.begin(), job_id.end(), [](char c) {
              return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '.' || c == '_' || c == '-';
            });
  if (ok) return Status::Ok();
  return InvalidArgument("shm transport: job id '" + job_id +
                         "' must be 1-200 characters of letters, digits, '.', '_' and '-'");
}

std::string ShmSegmentName(const std::string& job_id, const std::string& suffix) {
  return "/hora-" + job_id + "-" + suffix;
}

std::vector<std::string> ListShmSegments(const std::string& job_id) {
  std::vector<std::string> names;
  const std::string prefix = "hora-" + job_id + "-";
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return names;
  while (dirent* e = readdir(dir)) {
    std::string n = e->d_name;
    if (n.rfind(prefix, 0) == 0 && IsTransportSuffix(n.substr(prefix.size()))) {
      names.push_back("/" + n);
    }
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

Status RemoveShmSegments(const std::string& job_id) {
  HORA_RETURN_IF_ERROR(ValidateShmJobId(job_id));
  Status result;
  for (const std::string& name : ListShmSegments(job_id)) {
    if (shm_unlink(name.c_str()) != 0 && errno != ENOENT && result.ok()) {
      result = UnavailableError(Errno("cannot unlink", name, errno));
    }
  }
  return result;
}

}  // namespace hora

namespace hora {

std::string ShmCreatorTag(int pid, uint64_t pid_namespace) {
  return "p" + std::to_string(pid) + "-n" + std::to_string(pid_namespace);
}

int RemoveDeadShmSegments() {
  const std::string ours = std::to_string(PidNamespaceId());
  int removed = 0;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return 0;
  while (dirent* e = readdir(dir)) {
    // "hora-...-p<pid>-n<namespace>", of this pid namespace only: a pid of
    // another means nothing here.
    const std::string n = e->d_name;
    const size_t ns = n.rfind("-n");
    const size_t p = ns == std::string::npos ? ns : n.rfind("-p", ns);
    if (n.rfind("hora-", 0) != 0 || p == std::string::npos || n.substr(ns + 2) != ours ||
        !AllDigits(n.substr(p + 2, ns - p - 2)) || ns - p > 12) {
      continue;
    }
    const long pid = std::strtol(n.c_str() + p + 2, nullptr, 10);
    if (ProcessRuns(static_cast<int>(pid))) continue;
    if (shm_unlink(("/" + n).c_str()) == 0) ++removed;
  }
  closedir(dir);
  return removed;
}

}  // namespace hora
