// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Every HORA_* setting, declared once in a table (name, type, default, doc)
// and read once into an immutable Config when a Session is created. Nothing
// else in Hora reads the environment.
//
// An invalid value is an error at Session creation that names the variable,
// the value and what is accepted. Unknown HORA_* variables are reported as a
// warning-level message by the caller (they may be typos), not an error.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hora/status.h"

namespace hora {

enum class LogLevel : int { kTrace = 0, kDebug, kInfo, kWarning, kError, kOff };

struct Config {
  // Faults (docs/dev/design.md §6). A collective that waits this long for a rank
  // fails (0: never; a user's choice).
  double timeout_s;
  // A peer silent this long (no heartbeat) is lost (0: only a peer whose
  // process ended or whose connection closed is).
  double peer_timeout_s;
  // The bound of a Session's start: rendezvous and connections.
  double start_timeout_s;
  LogLevel log_level;
  // Algorithm overrides: "" (cost model decides), a name, or ranges of message
  // sizes to names ("rd:0-64K,ring:64K-"). Parsed and validated by the selector.
  std::string allreduce_algo;
  std::string hierarchical_allreduce;  // "auto", "1", "one" or "0": see Hierarchy below
  std::string broadcast_algo;
  std::string reducescatter_algo;
  std::string allgather_algo;  // auto, ring or shared_memory
  std::string alltoall_algo;   // auto, pairwise or shared_memory
  std::string blocks_at_once;  // "auto", "1" or "0": see BlocksAtOnce below
  // Ring and chain algorithms cut each block into segments of this size so
  // that transfer and reduction overlap.
  uint64_t ring_segment_bytes;
  // Shared memory: messages this large or larger go in a single copy,
  // read from the sender's memory (transport/shm/shm_direct.h); 0: never.
  uint64_t shm_single_copy_bytes;
  // Cost model parameters (alpha-beta-gamma) used by the selector.
  double cost_alpha_us;               // latency of one message within a host
  double cost_bandwidth_gbps;         // point-to-point bandwidth within a host, GB/s
  double cost_reduce_gbps;            // reduction throughput, GB/s of input
  double cost_net_alpha_us;           // latency of one message between hosts
  double cost_net_bandwidth_gbps;     // bandwidth of a host's network link, GB/s
  double cost_net_shared_efficiency;  // of a link several transfers cross at once (0, 1]
  // Engine (src/engine/): idle negotiation period, response cache entries,
  // fusion buffer size, stall report and stall failure times (0 = off; the
  // stall report also applies to every wait for a live rank).
  double cycle_time_ms;
  // How long a waiter polls before it sleeps, in microseconds: on a handle,
  // in the shm and TCP transports, and the engine for the next submission.
  // Waking a sleeping thread costs 10-30 us on a virtual machine. Handle and
  // engine polls yield the core every 64 polls; shm and TCP polls yield it
  // after every poll where ranks outnumber cores, so that a poller does not
  // hold up the rank it waits for.
  double wait_spin_us;
  uint64_t cache_capacity;
  uint64_t fusion_threshold_bytes;
  uint64_t output_pool_bytes;      // idle host memory kept for out-of-place outputs
  uint64_t gradient_bucket_bytes;  // hora.torch's DistributedOptimizer (Python only)
  // Autotuning (engine/autotuner.h): on (nonzero) or off, its CSV log ("":
  // none), samples left out first, steps a sample, seconds before it
  // warns that it found no step (0: never).
  uint64_t autotune;
  std::string autotune_log;
  uint64_t autotune_warmup_samples;
  uint64_t autotune_steps_per_sample;
  double autotune_no_step_warn_s;
  double stall_warning_s;
  double stall_shutdown_s;
  std::string disable_group_fusion;  // "1": groups fuse only with themselves
  std::string timeline;              // Chrome-trace file ("" = none)
  double timeline_max_mb;            // 0 = no limit
  // Job wiring, set by horarun (or by the user under another launcher).
  std::string transport;         // "", "shm", "tcp" or "mpi"
  std::string backend;           // "hora", "mpi" or "mpi-blocking"
  std::string bind_to;           // "none" or "core"
  std::string device;            // "auto", "cuda" or "host": what runs cuda:N tensors
  uint64_t staging_chunk_bytes;  // GPU tensors: pipelined staging's chunk (0: whole)
  std::string gpu_ipc;        // "1": GPU allreduce within a host through IPC windows; "0": staged
  uint64_t gpu_window_bytes;  // each rank's IPC window (two halves)
  std::string gpu_backend;    // "auto", "hora" or "nccl": who runs GPU allreduce, broadcast
  uint64_t nccl_min_bytes;    // auto: allreduce batches this large go to NCCL
  std::string gpu_route;      // GPU batches' first route by size (HORA_GPU_ROUTE; "": none)
  std::string nccl_library;   // "": libnccl.so.2; "host": the host device's NCCL (tests)
  std::string mpi_plugin;     // path of the MPI plugin; "" = found by the launcher's flavour
  std::string store_addr;     // host:port of the rendezvous store
  std::string store_server;   // "", "horarun" or "rank0": who serves store_addr
  std::string secret;         // per-job secret for HMAC authentication (never printed)
  std::string job_id;         // names shared-memory segments and store keys
  std::string worker_id;      // elastic jobs: this worker (empty: not elastic)
  double elastic_timeout_s = 600;
  std::string iface;           // network interface or address for TCP
  std::string tcp_congestion;  // of connections between hosts ("": the system's)
  std::string launcher;  // horarun's identity, which a rank watches (launch/launcher_identity.h)
};

// HORA_HIERARCHICAL_ALLREDUCE: where a job spans hosts with as many ranks
// on each, whether host tensors' allreduce reduces within hosts first
// (backends/host_tiers.h): never, always (every rank of a host crossing
// with its block: kOn; one rank a host with the whole message: kOne), or
// as the cost model predicts fastest, size by size.
enum class Hierarchy : uint8_t { kOff = 0, kOn = 1, kAuto = 2, kOne = 3 };

Hierarchy HierarchyOf(const Config& config);
// As the setting writes it: "0", "1", "auto", "one".
const char* HierarchyName(Hierarchy h);

// HORA_BLOCKS_AT_ONCE: whether allgather, alltoall and the scatter-
// allgather broadcast post every block's transfer at once instead of
// around a ring or in pairs (collectives/blocks_at_once.h): never, always
// (three ranks or more), or where receivers read the blocks in place
// (shared memory's single copy).
enum class BlocksAtOnce : uint8_t { kOff = 0, kOn = 1, kAuto = 2 };

BlocksAtOnce BlocksAtOnceOf(const Config& config);

// (kCount: a number of things, such as cache entries; read as kBytes is.)
enum class SettingType { kDouble, kBytes, kCount, kString, kLogLevel };

struct SettingSpec {
  const char* name;  // "HORA_TIMEOUT_S"
  SettingType type;
  const char* default_value;  // as it would be written in the environment
  const char* doc;            // one line
  // Read elsewhere (the rank layout), listed so that the table is complete.
  bool layout_only = false;
};

// The table, in documentation order.
const std::vector<SettingSpec>& AllSettings();

// Builds a Config from `env` (variable name -> value). Variables not present
// take their defaults. Only names in the table are read.
Result<Config> ConfigFromEnv(const std::map<std::string, std::string>& env);

// Snapshot of this process's HORA_* environment variables.
std::map<std::string, std::string> ReadProcessEnvironment();

// Names in `env` that start with HORA_ but are not in the table.
std::vector<std::string> UnknownSettings(const std::map<std::string, std::string>& env);

// The settings every rank of a job must give the same value (which
// algorithm runs, how the engine plans, how ranks connect), each with its
// value in `config` as FormatConfig writes it, in table order.
std::vector<std::pair<std::string, std::string>> AgreedSettings(const Config& config);

// The table with each setting's value in `config`, one line per setting,
// for `horarun --print-config` and for logs.
std::string FormatConfig(const Config& config);

const char* SettingTypeName(SettingType t);

}  // namespace hora
