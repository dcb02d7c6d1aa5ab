// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The MPI plugin interface. Hora's core never links an MPI library: each MPI
// installed at build time (OpenMPI, MPICH) gets its own small shared library,
// libhora-mpi-<flavour>.so, built against that MPI from src/mpi/plugin/ and
// the MPI transport (src/transport/mpi/). The core loads the one matching the
// launcher (mpi_loader.h) when a job asks for the MPI transport
// (HORA_TRANSPORT=mpi) or backend (HORA_BACKEND=mpi, mpi-blocking). So one
// build of Hora runs under either mpirun, and jobs that do not use MPI never
// load it.
//
// The plugin is built in the same tree with the same compiler, so the
// interface is C++ (a versioned entry point returning an abstract class).
//
// MPI itself is process-wide: the plugin initialises it (MPI_THREAD_MULTIPLE)
// on first use unless the program already did, and finalises it at process
// exit only when it initialised it. Every transport and backend works on its
// own duplicate of MPI_COMM_WORLD, so Hora's traffic never matches the
// program's own MPI messages.
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"
#include "common/clock.h"
#include "common/wait_policy.h"
#include "transport/transport.h"

namespace hora {

// Bumped whenever MpiLibrary or its entry point changes; the loader refuses
// other versions. (Additions go in new entry points, such as MpiBootstrap
// below, so that a plugin and a core of different ages still agree on this.)
inline constexpr int kMpiPluginAbiVersion = 3;

class MpiLibrary {
 public:
  virtual ~MpiLibrary() = default;
  // First line of MPI_Get_library_version: "Open MPI v4.1.4, ...".
  virtual std::string version() const = 0;
  // This process in MPI_COMM_WORLD.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Point-to-point over MPI_Isend/MPI_Irecv, progressed in the caller's thread.
  virtual Result<std::unique_ptr<Transport>> CreateTransport() = 0;
  // MPI's collectives. Nonblocking forms (MPI_Iallreduce, ...) tested until
  // done or `waits.timeout`, a TimeoutError; or, `blocking`, the blocking
  // forms (MPI_Allreduce, ...), watched by a thread that ends the job with
  // MPI_Abort when one outlasts `waits.timeout` (a blocking call cannot be
  // left). Either way a call still running after `waits.report_every` is
  // reported, and again each time as long again passes; a zero timeout is
  // none.
  virtual Result<std::unique_ptr<CollectiveBackend>> CreateBackend(const WaitPolicy& waits,
                                                                   bool blocking) = 0;
};

// The plugin's one exported symbol, looked up by this name. Returns the
// process's MpiLibrary (the same object on every call; never freed), or null
// with `*error` set.
using MpiPluginOpenFn = MpiLibrary* (*)(int abi_version, std::string* error);
inline constexpr const char* kMpiPluginOpenSymbol = "hora_mpi_plugin_open";

// What a job that does not otherwise use MPI needs from it to start under
// an MPI launcher (mpirun, srun with PMI): rank 0's rendezvous address and
// job secret, sent to every rank (process_connect.h). Added after
// MpiLibrary, as its own entry point: a plugin built before it lacks the
// symbol, and the loader says so instead of calling past its vtable.
class MpiBootstrap {
 public:
  virtual ~MpiBootstrap() = default;
  // Initialises MPI unless the program did (as MpiLibrary's entry point
  // does) and returns the process's MpiLibrary. MPI_Init waits for every
  // rank of the launcher's job, so it runs in a thread of its own and this
  // waits for it at most `timeout` (zero: no limit): a TimeoutError when
  // it passes, after which MPI stays unusable in this process (a later call
  // waits for the same initialisation again).
  virtual Result<MpiLibrary*> Open(Duration timeout) = 0;
  // Sends `*bytes` (at most kMpiBootstrapMaxBytes) from `root` to every
  // rank of MPI_COMM_WORLD, into `*bytes` on the others: MPI_Comm_idup and
  // MPI_Ibcast, each tested until done or `timeout` (zero: no limit) has
  // passed, a TimeoutError. Call after Open(), on every rank. After a
  // timeout (or a failed MPI_Test) the pending request is abandoned: MPI is
  // unusable in this process, later calls fail at once, and MPI is not
  // finalised at exit (a pending collective could hang MPI_Finalize).
  virtual Status Broadcast(std::string* bytes, int root, Duration timeout) = 0;
  // The thread level MPI provided (after Open): true for
  // MPI_THREAD_MULTIPLE.
  virtual bool thread_multiple() const = 0;
};

inline constexpr size_t kMpiBootstrapMaxBytes = 1024;
// Version of MpiBootstrap, the argument of its entry point (the plugin
// refuses others).
inline constexpr int kMpiBootstrapVersion = 1;
// The plugin's second exported symbol: returns the process's MpiBootstrap
// (the same object on every call; never freed), or null with `*error` set.
using MpiBootstrapOpenFn = MpiBootstrap* (*)(int version, std::string* error);
inline constexpr const char* kMpiBootstrapSymbol = "hora_mpi_plugin_bootstrap";

}  // namespace hora
