// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Where a process sits in the job: its rank, the job size, and the same on
// its host (local) and across hosts (cross). Read from the environment that
// a launcher sets, in this order of preference:
//   horarun      HORA_RANK, HORA_SIZE, HORA_LOCAL_RANK, HORA_LOCAL_SIZE,
//                HORA_CROSS_RANK, HORA_CROSS_SIZE
//   OpenMPI      OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/_LOCAL_SIZE
//   MPICH/Hydra  PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
//   Slurm        SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE
//                (or SLURM_TASKS_PER_NODE), SLURM_NODEID, SLURM_NNODES
//   torchrun     RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK
// Where a launcher started another, the nearer one's variables win:
// torchrun's workers (TORCHELASTIC_RUN_ID) take torchrun's over a Slurm
// step's or an MPI launcher's they inherit; a task of srun's PMI plugin
// (PMI_RANK without Hydra's MPI_LOCALRANKID, equal to SLURM_PROCID) takes
// Slurm's.
// Values a launcher does not give are derived where the layout is regular
// (cross rank = rank / local size when every host runs local size ranks).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hora/status.h"

namespace hora {

struct RankLayout {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
  std::string source;  // "horarun", "openmpi", "mpich", "slurm", "torchrun", "default"
  // Every host runs the same number of ranks (CompleteLayout; from the
  // launcher's variables alone, as far as this rank's own values tell).
  bool homogeneous = true;
};

// `env` holds the process environment (all variables, not just HORA_*).
// Without any launcher variables the layout is a single rank ("default").
// Inconsistent values (rank >= size, a non-number) are an InvalidArgument
// error naming the variables and values.
Result<RankLayout> RankLayoutFromEnv(const std::map<std::string, std::string>& env);

// A rank's place on its host, as its launcher gave it.
struct LocalPlace {
  int32_t local_rank = 0;
  int32_t local_size = 1;
};

// Completes `l` from every rank's place (`places`, indexed by rank; l's own
// rank among them), as Horovod derives them once the job is up, whatever
// the launcher gave: the cross rank is l's index among the ranks with its
// local rank, in rank order, and the cross size their number; the job is
// homogeneous when every rank's local size is the same. (A launcher gives
// no cross values, like mpirun, or derives them assuming even hosts with
// consecutive ranks, which uneven hosts or ranks placed round-robin break.)
void CompleteLayout(std::span<const LocalPlace> places, RankLayout* l);

// The task count of node `node_id` in Slurm's SLURM_TASKS_PER_NODE, a list
// like "2(x3),1" (three nodes with 2 tasks, then one with 1). Without a node
// id the counts must all be equal. Malformed text or a node id past the list
// is an InvalidArgument naming the value.
Result<int> SlurmTasksOnNode(const std::string& tasks_per_node, std::optional<int> node_id);
// Every node's task count in such a list, in node order.
Result<std::vector<int>> SlurmTaskCounts(const std::string& tasks_per_node);

}  // namespace hora
