// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Inside the MPI plugin (built once per MPI library, see mpi/mpi_plugin.h):
// the process's MPI state -- initialisation, the thread level, the largest
// tag, Hora's reduction ops for the types MPI lacks -- and the lock that
// serialises Hora's MPI calls.
#pragma once

#include <mpi.h>

#include <atomic>
#include <string>

#include "common/mutex.h"
#include "hora/types.h"
#include "mpi/mpi_plugin.h"
#include "transport/mpi/mpi_error.h"

namespace hora::mpi {

class Library final : public MpiLibrary {
 public:
  // Initialises MPI unless the program did; null with `*error` on failure.
  static Library* Open(std::string* error);

  std::string version() const override { return version_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Result<std::unique_ptr<Transport>> CreateTransport() override;
  Result<std::unique_ptr<CollectiveBackend>> CreateBackend(const WaitPolicy& waits,
                                                           bool blocking) override;

  // Hora serialises its own MPI calls (one lock per process): the plugin then
  // works with MPI_THREAD_SERIALIZED as well as MULTIPLE, and a transport's
  // progress never races another Session's.
  Mutex& mu() HORA_RETURN_CAPABILITY(mu_) { return mu_; }
  // MPI_THREAD_MULTIPLE: threads may be inside MPI at once (the blocking
  // backend needs it: it calls MPI without mu(), and aborts from a watchdog).
  bool thread_multiple() const { return thread_multiple_; }
  // Usable bits of a tag (MPI_TAG_UB is at least 2^15 - 1).
  int tag_bits() const { return tag_bits_; }

  // A nonblocking MPI call was given up while pending (a bootstrap
  // collective that timed out): MPI may still write into its buffers, and
  // MPI_Finalize would wait for, or progress, an operation the other ranks
  // may never join. MPI is then not finalised at exit (which an MPI
  // launcher may report as an improper exit of this rank; the job is
  // failing anyway).
  void AbandonRequests() { abandoned_requests_.store(true); }
  bool abandoned_requests() const { return abandoned_requests_.load(); }

  // A duplicate of MPI_COMM_WORLD that returns errors instead of aborting.
  Result<MPI_Comm> DupWorld(const char* what);

  // The MPI datatype and op that reduce `dtype` with `op` (never kAverage):
  // MPI's own for 16- to 64-bit integers and floats; Hora's kernels wrapped
  // in MPI_Op_create for float16, bfloat16 and bool, which MPI does not
  // define, and for 8-bit integers: OpenMPI 4.1's AVX ops saturate 8-bit
  // sums (200 + 200 gives 255, not 144), while Hora's integers wrap.
  MPI_Datatype Datatype(DataType dtype) const;
  MPI_Op Op(DataType dtype, ReduceOp op) const;

 private:
  Library() = default;
  Status Init();

  Mutex mu_;  // guards MPI itself, no member (those below are set once, by Init)
  std::string version_;
  int rank_ = 0;
  int size_ = 1;
  int tag_bits_ = 15;
  bool thread_multiple_ = false;
  std::atomic<bool> abandoned_requests_{false};
  // [float16, bfloat16, bool, uint8, int8][sum, min, max, product]
  MPI_Op user_ops_[5][4] = {};
};

}  // namespace hora::mpi
