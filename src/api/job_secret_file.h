// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A job secret handed from rank 0 to the other ranks through a private file,
// for launchers that cannot carry one (srun without MPI, torchrun): rank 0
// writes a fresh random secret to ~/.hora/jobs/<key> (directories 0700, the
// file 0600, written whole under another name and renamed into place), the
// others wait for it. It needs a home directory that every host of the job
// shares, as Slurm clusters have. Rank 0 removes the file once every rank
// has connected, and at the latest when its JobSecretFile is destroyed.
// Both sides refuse ~/.hora and ~/.hora/jobs unless each is a directory
// (not a symbolic link) of this user that group and others cannot write
// to, and readers refuse anything but a regular private file.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/clock.h"
#include "hora/status.h"

namespace hora {

// ~/.hora/jobs/<key>, home from HOME in `env` (else the password database).
// `key` may hold only letters, digits, '.', '-' and '_' (others are
// replaced by '_').
Result<std::string> JobSecretPath(const std::map<std::string, std::string>& env,
                                  const std::string& key);

// Rank 0's side: the file with a fresh secret, removed when this goes.
class JobSecretFile {
 public:
  // Creates the directories (or checks them, InvalidArgument naming one
  // that is not private) and writes the file (replacing a stale one).
  // `path` is JobSecretPath's.
  static Result<std::unique_ptr<JobSecretFile>> Create(const std::string& path);
  ~JobSecretFile();
  JobSecretFile(const JobSecretFile&) = delete;
  JobSecretFile& operator=(const JobSecretFile&) = delete;

  const std::string& path() const { return path_; }
  const std::string& secret() const { return secret_; }
  // Removes the file now (once; later calls and the destructor do nothing).
  void Remove();

 private:
  JobSecretFile(std::string path, std::string secret)
      : path_(std::move(path)), secret_(std::move(secret)) {}
  std::string path_;
  std::string secret_;
  bool removed_ = false;
};

// The other ranks' side: waits until `deadline` for the file at `path` and
// returns its secret. The file must be a regular file of this user that
// nobody else can read, in private directories (an InvalidArgument
// otherwise; a FIFO or device under the name is refused without waiting on
// it). A TimeoutError when it did not appear.
Result<std::string> ReadJobSecretFile(const std::string& path, TimePoint deadline);

}  // namespace hora
