// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Finds and loads the MPI plugin (mpi_plugin.h) for this job.
//
// Which one: HORA_MPI_PLUGIN when set (a path); otherwise the flavour of the
// launcher that started the process -- OpenMPI's mpirun sets
// OMPI_COMM_WORLD_*, MPICH's Hydra sets PMI_*, srun --mpi=pmix PMIX_* -- picks
// libhora-mpi-openmpi.so or libhora-mpi-mpich.so, looked for in the
// directory of the binary (or library) holding Hora's code, then in ../lib
// from there. A job not started by an MPI launcher, or a plugin that was not
// built, is an error naming what was looked for.
#pragma once

#include <map>
#include <string>

#include "common/config.h"
#include "mpi/mpi_plugin.h"

namespace hora {

// "openmpi", "mpich", or "" when `env` shows no MPI launcher.
std::string MpiFlavourFromEnv(const std::map<std::string, std::string>& env);

// Loads the plugin (once per process; later calls return the same library).
Result<MpiLibrary*> LoadMpiPlugin(const Config& config,
                                  const std::map<std::string, std::string>& env);

// The same plugin's MpiBootstrap: loads the plugin but starts nothing (MPI
// is initialised by MpiBootstrap::Open). An error when no plugin is found,
// or when it was built before the bootstrap existed.
Result<MpiBootstrap*> LoadMpiBootstrap(const Config& config,
                                       const std::map<std::string, std::string>& env);

}  // namespace hora
