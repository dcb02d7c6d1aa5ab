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
// give one: kSlurmStorePortBase + index, index = K * (job + K * step) mod
// kSlurmStorePortCount, with job and step taken mod the count and K =
// kSlurmStorePortStride, an odd multiple of neither 3 nor 5, so coprime to
// the count (12000 = 2^5 * 3 * 5^3), and near its golden section. So:
//  - step 0 of any 12000 consecutive jobs gets 12000 different ports, as
//    do any 12000 consecutive steps of one job (both maps are bijections);
//  - step s of job j meets step s + d of job j - d * K only: steps 0-7 of
//    any 1085 consecutive jobs are apart, steps 0-15 of any 421, 0-31 of
//    any 243 (the golden stride keeps d * K far from 0 for small d);
//  - ids far apart collide as random ones would, 1 in 12000.
// The range stays below Linux's ephemeral ports (32768 up, the default
// net.ipv4.ip_local_port_range), so that no outgoing connection holds it.
// (A hash of job and step would spread as well but repeat among consecutive
// jobs: 100 jobs would share a port with a chance of about 1 in 3.) Ids are
// Slurm's decimal SLURM_JOB_ID and SLURM_STEP_ID (up to 18 digits);
// anything else is an InvalidArgument.
inline constexpr int kSlurmStorePortBase = 20000;
inline constexpr int kSlurmStorePortCount = 12000;
inline constexpr int kSlurmStorePortStride = 7417;
Result<uint16_t> SlurmStorePort(const std::string& job_id, const std::string& step_id);

}  // namespace hora
