// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// `horarun --mpi`: the ranks are started by mpirun (OpenMPI's or MPICH's
// Hydra) instead of horarun's own spawner, so that the MPI transport and
// backend have an MPI job to work in. horarun still serves the rendezvous
// store for Hora's own transports; mpirun places the ranks on the same
// hosts and slots, forwards the HORA_* variables to every rank, tags their
// output with the rank, and stops the job when one rank fails.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "hora/status.h"
#include "hosts.h"

namespace hora::horarun {

enum class MpiFlavour { kOpenMpi, kMpich };

// Which MPI `version_text` (the output of `mpirun --version`) belongs to.
Result<MpiFlavour> MpiFlavourFromVersion(const std::string& mpirun,
                                         const std::string& version_text);

// Runs `mpirun --version` and reads its flavour.
Result<MpiFlavour> DetectMpirun(const std::string& mpirun);

struct MpirunSpec {
  std::string mpirun = "mpirun";
  MpiFlavour flavour = MpiFlavour::kOpenMpi;
  int np = 1;
  std::vector<HostSlots> hosts;
  std::vector<std::string> forward;  // variable names every rank gets
  bool prefix_output = true;
  bool as_root = false;  // OpenMPI refuses root without --allow-run-as-root
  std::vector<std::string> command;
};

// The mpirun command line for `spec`.
std::vector<std::string> MpirunCommand(const MpirunSpec& spec);

// Runs `argv` with `env` added to horarun's environment, forwarding SIGINT,
// SIGTERM and SIGHUP to it; returns its exit code (128 + signal when killed).
int RunMpirun(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env);

}  // namespace hora::horarun
