// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "launch/rank_layout.h"

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace hora {
namespace {

struct Names {
  const char* source;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
  const char* cross_rank;  // may be null
  const char* cross_size;  // may be null
};

constexpr Names kLaunchers[] = {
    {"horarun", "HORA_RANK", "HORA_SIZE", "HORA_LOCAL_RANK", "HORA_LOCAL_SIZE", "HORA_CROSS_RANK",
     "HORA_CROSS_SIZE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", nullptr, nullptr},
    {"mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", nullptr, nullptr},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
     "SLURM_NODEID", "SLURM_NNODES"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", nullptr},
};

Result<std::optional<int>> ReadInt(const std::map<std::string, std::string>& env,
                                   const char* name) {
  if (name == nullptr) return std::optional<int>();
  auto it = env.find(name);
  if (it == env.end()) return std::optional<int>();
  const std::string& v = it->second;
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < 0 || x > 1000000000L) {
    return InvalidArgument(std::string(name) + "='" + v + "' is not a non-negative integer");
  }
  return std::optional<int>(static_cast<int>(x));
}

}  // namespace

Result<std::vector<int>> SlurmTaskCounts(const std::string& tasks_per_node) {
  const std::string where = "SLURM_TASKS_PER_NODE='" + tasks_per_node + "'";
  std::vector<int> counts;  // one per node, the "(xK)" repeats expanded
  size_t pos = 0;
  while (pos <= tasks_per_node.size()) {
    size_t comma = tasks_per_node.find(',', pos);
    if (comma == std::string::npos) comma = tasks_per_node.size();
    const std::string entry = tasks_per_node.substr(pos, comma - pos);
    // strtol alone would take leading spaces and signs: digits come first.
    auto digit = [](const char* p) { return *p >= '0' && *p <= '9'; };
    char* end = nullptr;
    long count = digit(entry.c_str()) ? std::strtol(entry.c_str(), &end, 10) : 0;
    long repeat = 1;
    if (end != nullptr && *end == '(' && end[1] == 'x') {
      char* rend = nullptr;
      repeat = digit(end + 2) ? std::strtol(end + 2, &rend, 10) : 0;
      end = (rend != nullptr && *rend == ')') ? rend + 1 : nullptr;
    }
    if (end == nullptr || *end != '\0' || count < 1 || count > 1000000 || repeat < 1 ||
        repeat > 1000000) {
      return InvalidArgument(where + ": entry '" + entry + "' is not a task count like 4 or 4(x2)");
    }
    if (counts.size() + static_cast<size_t>(repeat) > 1000000) {
      return InvalidArgument(where + " lists more than 1000000 nodes");
    }
    counts.insert(counts.end(), static_cast<size_t>(repeat), static_cast<int>(count));
    pos = comma + 1;
  }
  return counts;
}

Result<int> SlurmTasksOnNode(const std::string& tasks_per_node, std::optional<int> node_id) {
  const std::string where = "SLURM_TASKS_PER_NODE='" + tasks_per_node + "'";
  HORA_ASSIGN_OR_RETURN(std::vector<int> counts, SlurmTaskCounts(tasks_per_node));
  if (!node_id) {
    for (int c : counts) {
      if (c != counts.front()) {
        return InvalidArgument(where +
                               " gives nodes different task counts, and SLURM_NODEID "
                               "(which node this is) is not set");
      }
    }
    return counts.front();
  }
  if (static_cast<size_t>(*node_id) >= counts.size()) {
    return InvalidArgument(where + " lists " + std::to_string(counts.size()) +
                           " node(s); SLURM_NODEID=" + std::to_string(*node_id) +
                           " is not one of them");
  }
  return counts[static_cast<size_t>(*node_id)];
}

// Whether `n`'s variables are those of the launcher that started this
// process, where several launchers' are present.
bool Nearest(const Names& n, const std::map<std::string, std::string>& env) {
  const std::string source = n.source;
  // torchrun's workers (TORCHELASTIC_RUN_ID) inherit what started torchrun,
  // such as a Slurm step's or an MPI launcher's variables: torchrun's are
  // nearer, before every launcher's but horarun's.
  const bool torchrun =
      env.count("TORCHELASTIC_RUN_ID") > 0 && env.count("RANK") > 0 && env.count("WORLD_SIZE") > 0;
  if (torchrun && source != "horarun" && source != "torchrun") return false;
  // srun's PMI plugins (--mpi=pmi2, or the cluster's MpiDefault) set
  // PMI_RANK and PMI_SIZE for every task, but not the local variables that
  // MPICH's Hydra sets: the task is Slurm's, and so is its place on the node.
  // (Another PMI launcher inside a Slurm allocation numbers its own ranks:
  // only where the two agree is it srun's.)
  if (source == "mpich" && env.count("MPI_LOCALRANKID") == 0) {
    const auto pmi = env.find("PMI_RANK");
    const auto task = env.find("SLURM_PROCID");
    if (pmi != env.end() && task != env.end() && pmi->second == task->second) return false;
  }
  return true;
}

Result<RankLayout> RankLayoutFromEnv(const std::map<std::string, std::string>& env) {
  for (const Names& n : kLaunchers) {
    if (!Nearest(n, env)) continue;
    HORA_ASSIGN_OR_RETURN(std::optional<int> rank, ReadInt(env, n.rank));
    HORA_ASSIGN_OR_RETURN(std::optional<int> size, ReadInt(env, n.size));
    if (!rank || !size) continue;
    RankLayout l;
    l.source = n.source;
    l.rank = *rank;
    l.size = *size;
    if (l.size < 1 || l.rank >= l.size) {
      return InvalidArgument(std::string(n.rank) + "=" + std::to_string(l.rank) + " is not below " +
                             n.size + "=" + std::to_string(l.size));
    }
    HORA_ASSIGN_OR_RETURN(std::optional<int> local_rank, ReadInt(env, n.local_rank));
    std::optional<int> local_size;
    // Slurm: the step's list (a step may use part of the allocation), else the job's.
    auto tasks = env.find("SLURM_STEP_TASKS_PER_NODE");
    if (tasks == env.end()) tasks = env.find("SLURM_TASKS_PER_NODE");
    std::vector<int> node_counts;  // tasks per node, when Slurm lists them
    std::optional<int> node;
    if (l.source == std::string("slurm") && env.count("SLURM_NTASKS_PER_NODE") == 0 &&
        tasks != env.end()) {
      HORA_ASSIGN_OR_RETURN(node, ReadInt(env, "SLURM_NODEID"));
      HORA_ASSIGN_OR_RETURN(local_size, SlurmTasksOnNode(tasks->second, node));
      HORA_ASSIGN_OR_RETURN(node_counts, SlurmTaskCounts(tasks->second));
    } else {
      HORA_ASSIGN_OR_RETURN(local_size, ReadInt(env, n.local_size));
    }
    if (local_rank && local_size && *local_size > 0) {
      l.local_rank = *local_rank;
      l.local_size = *local_size;
    } else if (local_rank) {  // a local rank without a local size: one host
      l.local_rank = *local_rank;
      l.local_size = l.size;
    } else {  // no local information: count every rank as its own host
      l.local_rank = 0;
      l.local_size = 1;
    }
    if (l.local_rank >= l.local_size) {
      return InvalidArgument(std::string(n.local_rank) + "=" + std::to_string(l.local_rank) +
                             " is not below the local size " + std::to_string(l.local_size));
    }
    HORA_ASSIGN_OR_RETURN(std::optional<int> cross_rank, ReadInt(env, n.cross_rank));
    HORA_ASSIGN_OR_RETURN(std::optional<int> cross_size, ReadInt(env, n.cross_size));
    l.cross_size = cross_size.value_or((l.size + l.local_size - 1) / l.local_size);
    l.cross_rank = cross_rank.value_or(l.rank / l.local_size);
    if (node && !node_counts.empty()) {
      // As horarun counts them (Horovod's meaning): among the nodes that
      // have a rank with this local rank, this node's index and their number.
      l.cross_rank = 0;
      l.cross_size = 0;
      for (size_t k = 0; k < node_counts.size(); ++k) {
        if (node_counts[k] <= l.local_rank) continue;
        if (k < static_cast<size_t>(*node)) ++l.cross_rank;
        ++l.cross_size;
      }
    }
    if (l.cross_rank >= l.cross_size) {
      return InvalidArgument("cross rank " + std::to_string(l.cross_rank) +
                             " is not below the cross size " + std::to_string(l.cross_size) +
                             " (from " + l.source + " variables)");
    }
    l.homogeneous = l.size == l.local_size * l.cross_size;
    return l;
  }
  RankLayout single;
  single.source = "default";
  return single;
}

void CompleteLayout(std::span<const LocalPlace> places, RankLayout* l) {
  l->cross_rank = 0;
  l->cross_size = 0;
  l->homogeneous = true;
  for (size_t r = 0; r < places.size(); ++r) {
    const LocalPlace& p = places[r];
    if (p.local_size != l->local_size) l->homogeneous = false;
    if (p.local_rank != l->local_rank) continue;
    if (r < static_cast<size_t>(l->rank)) ++l->cross_rank;
    ++l->cross_size;
  }
}

}  // namespace hora
