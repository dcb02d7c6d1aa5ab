// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// POSIX shared-memory segments of the shm transport: create, open, map and
// unlink, plus listing and removal by job for tests and for horarun.
//
// Names are "/hora-<job_id>-<suffix>" (visible as /dev/shm/hora-<job_id>-...),
// where the transport uses the suffixes "<src>-<dst>" (the channel from rank
// src to rank dst), "bell-<rank>" (the doorbell rank sleeps on) and
// "win-<rank>" (rank's shared windows, shm_window.h), each followed by
// "-p<pid>-n<pid namespace>" (the process that created it, ShmCreatorTag),
// and preceded, in a Session's
// job id, by "s<n>-" (the n-th Session of the job in each process) and, in a
// job spanning hosts, by "g<first rank>-" (a host's group). A job id may
// hold letters, digits, '.', '_' and '-' (at most 200 characters).
//
// Trust (design §5): a segment is created with O_CREAT|O_EXCL and mode 0600,
// so only its owner can open it and a name that already exists is never
// reused; Open() refuses a segment that belongs to another user, is readable
// by anyone else, or has an unexpected size.
//
// Lifetime: the creator's ShmSegment unlinks the name in its destructor if
// Unlink() was not called before; the mapping lives until the last process
// unmaps it. The transport unlinks each name as soon as every peer mapped it,
// so after rendezvous nothing remains under /dev/shm even if a process is
// later killed. What a crash during rendezvous leaves, RemoveShmSegments()
// clears (horarun, for its job), and so does RemoveDeadShmSegments() (every
// rank, as it creates its transport: the segments of any job whose creator
// is gone).
//
// Thread-safety: a ShmSegment is a value owned by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/process_alive.h"
#include "hora/status.h"

namespace hora {

class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Creates `name` (which must not exist) with mode 0600, sizes it to
  // `bytes` (zero-filled) and maps it read-write. This object owns the name.
  // `populate`: map every page now (no fault on first touch); false for
  // large segments of which a job may use little (the windows).
  static Result<ShmSegment> Create(const std::string& name, size_t bytes, bool populate = true);

  // Maps an existing segment created by this user with mode 0600 and exactly
  // `bytes` bytes. The name stays owned by its creator.
  static Result<ShmSegment> Open(const std::string& name, size_t bytes, bool populate = true);

  // Removes the name if this object created it and has not removed it yet;
  // the mapping stays valid. Idempotent.
  Status Unlink();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  bool mapped() const { return data_ != nullptr; }

 private:
  void Reset();

  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool owns_name_ = false;  // created here and not yet unlinked
};

// Checks that `job_id` is usable in segment names (see above).
Status ValidateShmJobId(const std::string& job_id);

// "/hora-<job_id>-<suffix>".
std::string ShmSegmentName(const std::string& job_id, const std::string& suffix);

// The names ("/hora-<job_id>-...", sorted) of the transport segments of
// `job_id` that exist now: only suffixes the transport uses are listed, so
// another job whose id extends this one ("<job_id>-2") does not show up.
std::vector<std::string> ListShmSegments(const std::string& job_id);

// Unlinks every segment ListShmSegments(job_id) returns (for horarun after a
// crash). Processes that still map them are not affected.
Status RemoveShmSegments(const std::string& job_id);

// "p<pid>-n<namespace>" (PidNamespaceId, common/process_alive.h), the tag
// that ends the names of the segments a process creates.
std::string ShmCreatorTag(int pid, uint64_t pid_namespace);

// Unlinks every "/hora-...-p<pid>-n<namespace>" segment of this process's
// pid namespace whose creating process is gone (ProcessRuns); returns how
// many. Segments made in another pid namespace that shares /dev/shm are
// left alone (a pid of another namespace means nothing here). A segment
// still mapped stays usable where it is mapped; a rendezvous that still
// needed it would fail anyway, its creator being gone.
int RemoveDeadShmSegments();

}  // namespace hora
