// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// What Hora reads from Slurm to start a job that srun launched without MPI:
// the step's host list, in Slurm's compressed syntax, and the port of the
// rendezvous store that rank 0 serves on the step's first host.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hora/status.h"

namespace hora {

// Expands a Slurm host list such as "node[01-03,07],gpu5" into its hosts in
// order: node01 node02 node03 node07 gpu5. Entries are separated by commas
// outside brackets; a bracket holds numbers and ranges "a-b" separated by
// commas, and a range keeps the zero padding of its bounds ("08-10": 08 09
// 10); an entry may hold several brackets ("r[1-2]n[1-2]": r1n1 r1n2 r2n1
// r2n2). Malformed text (an unclosed bracket, a range going down, an empty
// entry) or more than `max_hosts` hosts is an InvalidArgument naming it.
Result<std::vector<std::string>> ExpandSlurmHostlist(const std::string& hostlist,
                                                     size_t max_hosts = 1000000);

// The first host of such a list (without expanding the rest).
Result<std::string> FirstSlurmHost(const std::string& hostlist);

// The port of a Slurm step's rendezvous store when HORA_STORE_ADDR does not
// give one: kSlurmStorePortBase + (job_id * 64 + step_id) mod
// kSlurmStorePortCount, below Linux's ephemeral range (32768 up), so that
// no outgoing connection holds it. Steps of one job, and consecutive jobs,
// get different ports (until the range wraps). Ids are Slurm's decimal
// SLURM_JOB_ID and SLURM_STEP_ID; anything else is an InvalidArgument.
inline constexpr int kSlurmStorePortBase = 20000;
inline constexpr int kSlurmStorePortCount = 12000;
Result<uint16_t> SlurmStorePort(const std::string& job_id, const std::string& step_id);

}  // namespace hora
