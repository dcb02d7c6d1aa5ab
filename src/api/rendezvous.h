// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// How the ranks of a job started by processes find rank 0's rendezvous
// store and agree on the job secret, with no variable from the user, under
// each launcher (the first that applies):
//   address  HORA_STORE_ADDR (horarun sets it); else MASTER_ADDR with
//            MASTER_PORT + 1 (torchrun); else, under an MPI launcher
//            (MpiCarriesRendezvous below), rank 0's own: HORA_IFACE's address
//            or the host's first non-loopback one (127.0.0.1 when the whole
//            job is on one host), at a port the kernel picks, sent to every
//            rank by an MPI broadcast; else, under srun, the first host of
//            SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST) at
//            SlurmStorePort(SLURM_JOB_ID, SLURM_STEP_ID) (launch/slurm.h).
//   secret   HORA_SECRET (horarun sets it); else, under an MPI launcher
//            (MpiCarriesRendezvous), a random one of rank 0's sent by the
//            same broadcast; else, under srun or torchrun, a random one of
//            rank 0's passed in a private file of the home directory
//            (job_secret_file.h), named
//            by the Slurm job, step and store port
//            (~/.hora/jobs/<job>.<step>-<port>), or by torchrun's run id,
//            the store's address and the restart count.
// Every wait is bounded by one deadline, HORA_START_TIMEOUT_S from the
// start, and its error names what it waited for.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "api/job_secret_file.h"
#include "common/config.h"
#include "common/logging.h"
#include "launch/rank_layout.h"
#include "mpi/mpi_plugin.h"
#include "store/store.h"
#include "store/tcp_store_server.h"

namespace hora {

struct Rendezvous {
  std::unique_ptr<TcpStoreServer> server;  // rank 0, when it serves the store
  std::shared_ptr<Store> store;            // connected and authenticated
  std::string store_addr;                  // "host:port"
  std::string secret;
  // Rank 0's secret file (srun, torchrun): remove it once every rank has
  // connected; it goes with this at the latest.
  std::unique_ptr<JobSecretFile> secret_file;
  // Set when MPI carried the address and secret (MPI is then initialised).
  MpiBootstrap* mpi = nullptr;
};

// Whether MPI carries the rendezvous address and secret: under mpirun
// (OMPI_*, PMI_* or PMIX_* variables), but under srun (SLURM_JOB_ID,
// SLURM_STEP_ID, SLURM_PROCID and a node list) only for a job that uses
// MPI anyway, HORA_TRANSPORT=mpi or HORA_BACKEND=mpi or mpi-blocking.
// Where the cluster's default MPI plugin is pmi2 or pmix (MpiDefault),
// srun sets PMI_RANK or PMIX_RANK for every task, also of jobs that never
// use MPI, and MPI_Init there may fail or abort the process; such jobs
// meet through the step's first host and the home directory instead.
// Never for a torchrun worker (`layout_source` "torchrun"): MPI variables
// there are inherited from a launcher that started torchrun, and MPI_Init
// in a process it did not start aborts it.
bool MpiCarriesRendezvous(const Config& config, const std::map<std::string, std::string>& env,
                          const std::string& layout_source);

// `env` is the whole process environment; `layout` this rank's place.
Result<Rendezvous> JoinRendezvous(const Config& config,
                                  const std::map<std::string, std::string>& env,
                                  const RankLayout& layout, const Logger& logger);

}  // namespace hora
