// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "api/job_secret_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "net/auth.h"

namespace hora {
namespace {

std::string Errno() { return std::strerror(errno); }

std::string Directory(const std::string& path) { return path.substr(0, path.rfind('/')); }

std::string Octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// `dir` (~/.hora or ~/.hora/jobs) must be a directory, not a symbolic link
// to one, of this user, that nobody else can write to: whoever can
// replace its entries can replace the secret. Checked on the directory
// itself (lstat, then opened with O_NOFOLLOW | O_DIRECTORY and checked again
// there, so that the entry cannot change between the two).
Status CheckPrivateDirectory(const std::string& dir) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0)
    return UnavailableError("cannot look at " + dir + ": " + Errno());
  const auto refuse = [&](const std::string& why) {
    return InvalidArgument(dir + " " + why +
                           ": it holds the job secret files, so it must be a directory of this "
                           "user (uid " +
                           std::to_string(geteuid()) +
                           ") that group and others cannot write to (mode 0700); fix or remove it");
  };
  if (S_ISLNK(st.st_mode)) return refuse("is a symbolic link");
  if (!S_ISDIR(st.st_mode)) return refuse("is not a directory");
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return UnavailableError("cannot open " + dir + ": " + Errno());
  const bool ok = fstat(fd, &st) == 0;
  close(fd);
  if (!ok) return UnavailableError("cannot look at " + dir + ": " + Errno());
  if (st.st_uid != geteuid()) {
    return refuse("belongs to uid " + std::to_string(st.st_uid) + ", not to this user");
  }
  if ((st.st_mode & 022) != 0)
    return refuse("can be written by others (mode " + Octal(st.st_mode) + ")");
  return Status::Ok();
}

// The home's .hora and .hora/jobs (the two directories above `path`),
// created with mode 0700 where missing, and checked.
Status PrivateDirectories(const std::string& path, bool create) {
  const std::string jobs = Directory(path);
  const std::string hora = Directory(jobs);
  for (const std::string& dir : {hora, jobs}) {
    if (create && mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return UnavailableError("cannot create " + dir + ": " + Errno());
    }
    HORA_RETURN_IF_ERROR(CheckPrivateDirectory(dir));
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> JobSecretPath(const std::map<std::string, std::string>& env,
                                  const std::string& key) {
  std::string home;
  if (auto it = env.find("HOME"); it != env.end()) home = it->second;
  if (home.empty()) {
    if (const passwd* pw = getpwuid(geteuid()); pw != nullptr && pw->pw_dir != nullptr) {
      home = pw->pw_dir;
    }
  }
  if (home.empty() || home.front() != '/') {
    return InvalidArgument("no home directory (HOME='" + home +
                           "') to pass the job secret through; set HORA_SECRET on every rank");
  }
  while (home.size() > 1 && home.back() == '/') home.pop_back();
  std::string name = key;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  }
  if (name.empty() || name[0] == '.') name.insert(0, "_");
  return home + "/.hora/jobs/" + name;
}

Result<std::unique_ptr<JobSecretFile>> JobSecretFile::Create(const std::string& path) {
  HORA_RETURN_IF_ERROR(PrivateDirectories(path, /*create=*/true));
  HORA_ASSIGN_OR_RETURN(std::string secret, net::RandomHex(32));
  const std::string tmp = path + ".tmp-" + std::to_string(getpid());
  unlink(tmp.c_str());  // a leftover of a process that had this pid
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return UnavailableError("cannot create " + tmp + ": " + Errno());
  const std::string line = secret + "\n";
  const bool written =
      write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && fsync(fd) == 0;
  const std::string why = Errno();
  close(fd);
  if (!written || rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string error = written ? Errno() : why;
    unlink(tmp.c_str());
    return UnavailableError("cannot write the job secret to " + path + ": " + error);
  }
  return std::unique_ptr<JobSecretFile>(new JobSecretFile(path, std::move(secret)));
}

JobSecretFile::~JobSecretFile() { Remove(); }

void JobSecretFile::Remove() {
  if (removed_) return;
  removed_ = true;
  unlink(path_.c_str());
}

Result<std::string> ReadJobSecretFile(const std::string& path, TimePoint deadline) {
  const std::string dir = Directory(path);
  for (;;) {
    // Opening the directory first makes an NFS client look at it again
    // (close-to-open), instead of trusting a cached "no such file".
    if (DIR* d = opendir(dir.c_str()); d != nullptr) closedir(d);
    // O_NONBLOCK: a FIFO (or a device) under the name must not hold the
    // reader in open or read; it is refused below.
    const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
      struct stat st {};
      if (fstat(fd, &st) != 0) {
        const std::string why = Errno();
        close(fd);
        return UnavailableError("cannot look at " + path + ": " + why);
      }
      if (st.st_uid != geteuid() || (st.st_mode & 077) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return InvalidArgument(path +
                               " is not a private file of this user (a regular file, owner and "
                               "mode 0600 expected): remove it");
      }
      std::string text(200, '\0');
      const ssize_t n = read(fd, text.data(), text.size());
      const std::string why = Errno();
      close(fd);
      if (n < 0) return UnavailableError("cannot read " + path + ": " + why);
      HORA_RETURN_IF_ERROR(PrivateDirectories(path, /*create=*/false));
      text.resize(static_cast<size_t>(n));
      if (text.size() > 1 && text.back() == '\n') {
        text.pop_back();
        return text;
      }
      // Only a complete file is ever renamed into place: this one is not ours.
      return InvalidArgument(path + " does not hold a job secret: remove it");
    }
    if (errno != ENOENT) return UnavailableError("cannot open " + path + ": " + Errno());
    if (Clock::now() >= deadline) return TimeoutError(path + " did not appear");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace hora
