// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/config_rows.h"

namespace hora::config_internal {
namespace {

// Durations in seconds stop here (about three years): larger values would
// overflow the clock's nanoseconds.
constexpr double kMaxSeconds = 1e8;

}  // namespace

const std::vector<SettingRow>& Rows() {
  static const std::vector<SettingRow> rows = {
      {.spec =
           {"HORA_TIMEOUT_S", SettingType::kDouble, "0",
            "Collective timeout in seconds: a collective still waiting for a rank after this long "
            "fails with a timeout error on the ranks that wait (0: none; a lost rank is found by "
            "HORA_PEER_TIMEOUT_S, a slow one is reported by HORA_STALL_WARNING_S)"},
       .as_double = &Config::timeout_s,
       .zero_ok = true,
       .max = kMaxSeconds},
      {.spec =
           {"HORA_PEER_TIMEOUT_S", SettingType::kDouble, "5",
            "A rank whose process shows no sign of life for this long (stopped, frozen) counts as "
            "lost: every rank fails, naming it (0: only a process that ended or a connection that "
            "closed counts as lost). At least 1: each rank beats every fifth of it (at most 1 s "
            "apart), and a healthy process can pause for a good part of a second (a page storm, "
            "a busy host)"},
       .as_double = &Config::peer_timeout_s,
       .zero_ok = true,
       .max = kMaxSeconds,
       .min = 1},
      {.spec = {"HORA_START_TIMEOUT_S", SettingType::kDouble, "120",
                "How long a Session's start (rendezvous, connections) waits for the other ranks"},
       .as_double = &Config::start_timeout_s,
       .max = kMaxSeconds},
      {.spec = {"HORA_LOG_LEVEL", SettingType::kLogLevel, "warning",
                "Messages at this level and above are printed: trace, debug, info, warning, error, "
                "off"},
       .as_log_level = &Config::log_level},
      {.spec = {"HORA_ALLREDUCE_ALGO", SettingType::kString, "",
                "Allreduce algorithm: empty (cost model), a name (ring, recursive_doubling, "
                "halving_doubling), or size ranges such as rd:0-64K,ring:64K-"},
       .as_string = &Config::allreduce_algo,
       .agree = true},
      {.spec = {"HORA_HIERARCHICAL_ALLREDUCE", SettingType::kString, "auto",
                "Where a job spans hosts with as many ranks on each (two or more): 1: host "
                "tensors' allreduce reduces within each host, across hosts (every rank of a "
                "host with its block), then gathers within it; one: the same with one rank a "
                "host crossing with the whole message; 0: flat; auto: whichever of the three the "
                "cost model predicts fastest"},
       .as_string = &Config::hierarchical_allreduce,
       .choices = "auto|1|one|0",
       .agree = true},
      {.spec =
           {"HORA_BROADCAST_ALGO", SettingType::kString, "",
            "Broadcast algorithm: empty (cost model), binomial, scatter_allgather, shared_memory "
            "(ranks of one host), or size ranges"},
       .as_string = &Config::broadcast_algo,
       .agree = true},
      {.spec = {"HORA_REDUCESCATTER_ALGO", SettingType::kString, "",
                "Reducescatter algorithm: empty (shared_memory where the ranks share a host's "
                "window, else ring), ring, shared_memory, or size ranges"},
       .as_string = &Config::reducescatter_algo,
       .agree = true},
      {.spec = {"HORA_ALLGATHER_ALGO", SettingType::kString, "auto",
                "Allgather algorithm: auto (shared_memory where the ranks share a host's window, "
                "but two ranks exchanging blocks of 1 MiB or more in place; else ring), ring (or "
                "at once, or in place, where blocks are read in place), shared_memory"},
       .as_string = &Config::allgather_algo,
       .choices = "auto|ring|shared_memory",
       .agree = true},
      {.spec = {"HORA_ALLTOALL_ALGO", SettingType::kString, "auto",
                "Alltoall algorithm: auto (shared_memory where the ranks share a host's window "
                "and every block fits a round's slot and is below 256 KiB, at two ranks 16 KiB "
                "at most; else pairwise), pairwise (or at once, or in place, where blocks are "
                "read in place), shared_memory"},
       .as_string = &Config::alltoall_algo,
       .choices = "auto|pairwise|shared_memory",
       .agree = true},
      {.spec = {"HORA_BLOCKS_AT_ONCE", SettingType::kString, "auto",
                "Allgather, alltoall and the scatter_allgather broadcast: 1: every block's "
                "transfer posted at once (three ranks or more); 0: around a ring, or in pairs "
                "(alltoall); auto: at once where receivers read the blocks in place (shared "
                "memory's single copy)"},
       .as_string = &Config::blocks_at_once,
       .choices = "auto|1|0",
       .agree = true},
      {.spec = {"HORA_RING_SEGMENT_BYTES", SettingType::kBytes, "256K",
                "Segment size of ring pipelines (transfer of one segment overlaps reduction of "
                "another)"},
       .as_bytes = &Config::ring_segment_bytes,
       .agree = true},
      {.spec = {"HORA_SHM_SINGLE_COPY_BYTES", SettingType::kBytes, "256K",
                "Shared memory, where a host's ranks outnumber its cores: messages of at least "
                "this size are read by the receiver straight from the sender's memory (one copy "
                "instead of two) where the kernel allows it (process_vm_readv); two ranks "
                "exchanging allgather or alltoall blocks of 1 MiB or more read each other's so "
                "whatever the cores; 0: never"},
       .as_bytes = &Config::shm_single_copy_bytes,
       .zero_ok = true},
      {.spec = {"HORA_COST_ALPHA_US", SettingType::kDouble, "2",
                "Cost model: latency of one message within a host in microseconds"},
       .as_double = &Config::cost_alpha_us,
       .agree = true},
      {.spec = {"HORA_COST_BANDWIDTH_GBPS", SettingType::kDouble, "8",
                "Cost model: point-to-point bandwidth within a host in GB/s"},
       .as_double = &Config::cost_bandwidth_gbps,
       .agree = true},
      {.spec = {"HORA_COST_REDUCE_GBPS", SettingType::kDouble, "10",
                "Cost model: reduction throughput in GB/s of input"},
       .as_double = &Config::cost_reduce_gbps,
       .agree = true},
      {.spec = {"HORA_COST_NET_ALPHA_US", SettingType::kDouble, "25",
                "Cost model: latency of one message between hosts in microseconds"},
       .as_double = &Config::cost_net_alpha_us,
       .agree = true},
      {.spec = {"HORA_COST_NET_BANDWIDTH_GBPS", SettingType::kDouble, "1.25",
                "Cost model: bandwidth of a host's network link in GB/s (1.25: 10 Gb/s)"},
       .as_double = &Config::cost_net_bandwidth_gbps,
       .agree = true},
      {.spec = {"HORA_COST_NET_SHARED_EFFICIENCY", SettingType::kDouble, "1",
                "Cost model: the share of a host link's bandwidth that several transfers "
                "crossing it at once get together (1: all of it)"},
       .as_double = &Config::cost_net_shared_efficiency,
       .max = 1,
       .agree = true},
      {.spec =
           {"HORA_CYCLE_TIME_MS", SettingType::kDouble, "1",
            "Engine: how often an idle engine looks whether to join the others (on one host: once "
            "one "
            "waits for it); looks that find nothing to do come further apart, up to 16 times this; "
            "submitted work wakes it at once, or, where threads waiting on handles run the cycles, "
            "after this long (the first time, at its next look); 0, Horovod's value for no wait, "
            "is taken as the shortest, 0.1"},
       .as_double = &Config::cycle_time_ms,
       .zero_ok = true},
      {.spec = {"HORA_WAIT_SPIN_US", SettingType::kDouble, "50",
                "How long a waiting thread polls before it sleeps, in microseconds (handles, the "
                "engine's "
                "queue, shm and TCP waits; TCP waits on a host whose ranks outnumber its cores "
                "yield between looks and poll 200 at least); 0: sleep at once"},
       .as_double = &Config::wait_spin_us,
       .zero_ok = true},
      {.spec =
           {"HORA_CACHE_CAPACITY", SettingType::kCount, "1024",
            "Engine: entries of the response cache (0 disables it: every tensor is negotiated with "
            "the coordinator)"},
       .as_bytes = &Config::cache_capacity,
       .zero_ok = true,
       .agree = true},
      {.spec =
           {"HORA_FUSION_THRESHOLD_BYTES", SettingType::kBytes, "64M",
            "Engine: tensors ready together are packed into one buffer up to this size (0 disables "
            "fusion)"},
       .as_bytes = &Config::fusion_threshold_bytes,
       .zero_ok = true,
       .agree = true},
      {.spec = {"HORA_OUTPUT_POOL_BYTES", SettingType::kBytes, "256M",
                "Freed outputs (hvd.allreduce, allgather, alltoall, reducescatter) kept for the "
                "next, already faulted in: at most this much kept unused (0: none)"},
       .as_bytes = &Config::output_pool_bytes,
       .zero_ok = true},
      {.spec = {"HORA_GRADIENT_BUCKET_BYTES", SettingType::kBytes, "32K",
                "DistributedOptimizer (hora.torch): gradients of at most this size are copied "
                "into buckets of up to 1 MiB, each reduced by one allreduce (0: every gradient "
                "by its own)"},
       .as_bytes = &Config::gradient_bucket_bytes,
       .zero_ok = true,
       .agree = true},
      {.spec = {"HORA_AUTOTUNE", SettingType::kCount, "0",
                "1: the first rank tunes the fusion threshold, cycle time, response cache, "
                "allreduce algorithm cut-off and hierarchical allreduce while the job trains, "
                "then keeps the best it scored (docs/guide/tuning.md); 0: off"},
       .as_bytes = &Config::autotune,
       .zero_ok = true},
      {.spec = {"HORA_AUTOTUNE_LOG", SettingType::kString, "",
                "Autotuning's CSV log on the first rank: each sample's settings and score, and "
                "the choice (\"\": none)"},
       .as_string = &Config::autotune_log},
      {.spec = {"HORA_AUTOTUNE_WARMUP_SAMPLES", SettingType::kCount, "3",
                "Autotuning: samples left out at the start, before any is scored"},
       .as_bytes = &Config::autotune_warmup_samples,
       .zero_ok = true},
      {.spec = {"HORA_AUTOTUNE_STEPS_PER_SAMPLE", SettingType::kCount, "10",
                "Autotuning: training steps a sample scores (a step ends each time the first "
                "tensor's name comes again)"},
       .as_bytes = &Config::autotune_steps_per_sample},
      {.spec = {"HORA_AUTOTUNE_NO_STEP_WARN_S", SettingType::kDouble, "60",
                "Autotuning: the first rank warns once that nothing is tuned when no step was "
                "found (no tensor name came again) this many seconds and 10000 collectives "
                "after the first finished (0: never)"},
       .as_double = &Config::autotune_no_step_warn_s,
       .zero_ok = true,
       .max = kMaxSeconds},
      {.spec =
           {"HORA_STALL_WARNING_S", SettingType::kDouble, "60",
            "A collective that some ranks submitted and others not is reported after this long, "
            "and again each time as long again passes, naming the operation, the tensor and the "
            "missing ranks; so is any wait for a rank that is alive (0 disables)"},
       .as_double = &Config::stall_warning_s,
       .zero_ok = true,
       .max = kMaxSeconds},
      {.spec =
           {"HORA_STALL_SHUTDOWN_S", SettingType::kDouble, "0",
            "After this long a stalled collective fails on the ranks that submitted it, with the "
            "report (0: never)"},
       .as_double = &Config::stall_shutdown_s,
       .zero_ok = true,
       .max = kMaxSeconds},
      {.spec =
           {"HORA_DISABLE_GROUP_FUSION", SettingType::kString, "0",
            "Engine: 1 keeps the members of a grouped collective from fusing with other tensors"},
       .as_string = &Config::disable_group_fusion,
       .choices = "0|1",
       .agree = true},
      {.spec =
           {"HORA_TIMELINE", SettingType::kString, "",
            "Engine: write a Chrome-trace timeline of every tensor to this file (rank 0; a path "
            "with {rank} gives every rank its own file)"},
       .as_string = &Config::timeline},
      {.spec =
           {"HORA_TIMELINE_MAX_MB", SettingType::kDouble, "1024",
            "Engine: stop recording the timeline once its file reaches this size (0: no limit)"},
       .as_double = &Config::timeline_max_mb,
       .zero_ok = true},
      {.spec =
           {"HORA_TRANSPORT", SettingType::kString, "",
            "Transport between ranks: empty (shared memory within a host, TCP across hosts), shm, "
            "tcp, mpi (point-to-point over the MPI library the job was started with)"},
       .as_string = &Config::transport,
       .choices = "|shm|tcp|mpi",
       .agree = true},
      {.spec =
           {"HORA_DEVICE", SettingType::kString, "auto",
            "Where tensors on a GPU (cuda:N) are worked on: auto (the CUDA device of the tensor, "
            "in a CUDA build on a machine with a GPU), cuda (the same, and an error at the first "
            "GPU tensor when there is none), host (the host device: GPU semantics on CPU memory, "
            "for tests; Hora's Python module and tools have it, libhora.so does not)"},
       .as_string = &Config::device,
       .choices = "auto|cuda|host"},
      {.spec =
           {"HORA_STAGING_CHUNK_BYTES", SettingType::kBytes, "4M",
            "GPU tensors staged through host memory go in chunks of this size, the copies of one "
            "overlapping the collective on another (0: each batch whole)"},
       .as_bytes = &Config::staging_chunk_bytes,
       .zero_ok = true,
       .agree = true},
      {.spec =
           {"HORA_GPU_IPC", SettingType::kString, "1",
            "GPU allreduce among the ranks of one host: 1 lets it reduce on the GPU in CUDA IPC "
            "windows where that costs less (from about 170 KiB; HORA_GPU_ROUTE); 0 stages "
            "through host memory. A rank with 0, or one that cannot open its peers' windows, "
            "makes every rank stage"},
       .as_string = &Config::gpu_ipc,
       .choices = "0|1"},
      {.spec = {"HORA_GPU_BACKEND", SettingType::kString, "auto",
                "Who runs GPU tensors' collectives: auto (NCCL for batches of HORA_NCCL_MIN_BYTES "
                "or more where its library loads and every rank has a GPU of its own, but for a "
                "one-rank allreduce or broadcast, made on the GPU alone; Hora's paths otherwise), "
                "hora (never NCCL), nccl (NCCL for every batch it takes, and an error where it "
                "cannot be used)"},
       .as_string = &Config::gpu_backend,
       .choices = "auto|hora|nccl",
       .agree = true},
      {.spec =
           {"HORA_NCCL_MIN_BYTES", SettingType::kBytes, "256K",
            "With HORA_GPU_BACKEND=auto: batches of GPU tensors of at least this size go to NCCL "
            "(smaller ones stay on Hora's device windows or staging, faster for small messages; "
            "a one-rank allreduce or broadcast stays on the GPU alone)"},
       .as_bytes = &Config::nccl_min_bytes,
       .zero_ok = true,
       .agree = true},
      {.spec = {"HORA_GPU_ROUTE", SettingType::kString, "",
                "The route a batch of GPU tensors tries first, by its size, in "
                "HORA_ALLREDUCE_ALGO's syntax: a name alone (staged) or ranges "
                "(window:0-1M,staged_chunks:1M-); names one_rank, nccl, window, staged_chunks, "
                "staged. A route that does not fit the batch (window: allreduce; nccl: where "
                "HORA_GPU_BACKEND lets it, whatever HORA_NCCL_MIN_BYTES) or declines it (no device "
                "window, NCCL unusable) leaves it to the route of least predicted cost"},
       .as_string = &Config::gpu_route,
       .agree = true},
      {.spec = {"HORA_NCCL_LIBRARY", SettingType::kString, "",
                "The NCCL library to load (empty: libnccl.so.2 where the dynamic loader finds it); "
                "host: a stand-in with NCCL's semantics on the host device (HORA_DEVICE=host), "
                "for tests, between threads or processes of one machine (host:queued: its calls "
                "wait on the rank's stream, as NCCL's kernels do; host:net: another rank's end "
                "is reported as NCCL's remote error; host:refuse-call=N: its communicators refuse "
                "the Nth call they are asked to make)"},
       .as_string = &Config::nccl_library},
      {.spec =
           {"HORA_GPU_WINDOW_BYTES", SettingType::kBytes, "32M",
            "Each rank's IPC window in GPU memory (HORA_GPU_IPC): two halves, each the most one "
            "step of an allreduce moves; ranks that differ stage instead"},
       .as_bytes = &Config::gpu_window_bytes},
      {.spec =
           {"HORA_BIND_TO", SettingType::kString, "none",
            "Processes: none (run where the system puts them) or core (each rank of a host on a "
            "CPU of its own, the local_rank-th of the mask it started with; not where ranks "
            "outnumber CPUs). horarun --bind-to sets it"},
       .as_string = &Config::bind_to,
       .choices = "none|core"},
      {.spec =
           {"HORA_BACKEND", SettingType::kString, "hora",
            "Who runs the collectives: hora (Hora's algorithms over the transport), mpi (the MPI "
            "library's own collectives in their nonblocking forms, MPI_Iallreduce, MPI_Ibcast, "
            "..., "
            "waited on for at most HORA_TIMEOUT_S; needs an MPI launcher) or mpi-blocking (its "
            "blocking MPI_Allreduce, MPI_Bcast, ..., as MPI benchmarks call them; one that "
            "outlasts "
            "HORA_TIMEOUT_S cannot be interrupted and aborts the job with MPI_Abort); nccl is "
            "HORA_GPU_BACKEND=nccl with Hora's algorithms for host tensors"},
       .as_string = &Config::backend,
       .choices = "hora|mpi|mpi-blocking|nccl",
       .agree = true},
      {.spec =
           {"HORA_MPI_PLUGIN", SettingType::kString, "",
            "Path of the Hora MPI plugin to load (default: libhora-mpi-openmpi.so or "
            "libhora-mpi-mpich.so beside the Hora binaries, chosen from the launcher's variables)"},
       .as_string = &Config::mpi_plugin},
      {.spec = {"HORA_STORE_ADDR", SettingType::kString, "",
                "host:port of the rendezvous store (set by horarun; rank 0 serves it under other "
                "launchers)"},
       .as_string = &Config::store_addr},
      {.spec =
           {"HORA_STORE_SERVER", SettingType::kString, "",
            "Who serves the rendezvous store: empty (horarun when it started the ranks, else rank "
            "0), horarun (set by horarun --mpi), rank0"},
       .as_string = &Config::store_server,
       .choices = "|horarun|rank0"},
      {.spec =
           {"HORA_SECRET", SettingType::kString, "",
            "Per-job secret authenticating every TCP connection (set by horarun; never printed)"},
       .as_string = &Config::secret,
       .secret = true},
      {.spec = {"HORA_JOB_ID", SettingType::kString, "",
                "Job identifier naming shared-memory segments (set by horarun)"},
       .as_string = &Config::job_id},
      {.spec = {"HORA_WORKER_ID", SettingType::kString, "",
                "Elastic jobs: this worker's id; each init() takes its rank and world from the "
                "launcher's store instead of the environment (set by horarun's elastic mode)"},
       .as_string = &Config::worker_id},
      {.spec = {"HORA_ELASTIC_TIMEOUT_S", SettingType::kDouble, "600",
                "Elastic jobs: how long init() waits for the launcher to place this worker in "
                "a new world (horarun --elastic-timeout)"},
       .as_double = &Config::elastic_timeout_s,
       .max = kMaxSeconds},
      {.spec = {"HORA_IFACE", SettingType::kString, "",
                "Network interface name or address that TCP connections use (empty: the host's "
                "first non-loopback address, IPv4 first)"},
       .as_string = &Config::iface},
      {.spec = {"HORA_TCP_CONGESTION", SettingType::kString, "",
                "TCP congestion control of the TCP transport's connections between hosts, such as "
                "cubic, reno or bbr (empty: the system's; connections within a host use reno)"},
       .as_string = &Config::tcp_congestion,
       .agree = true},
      {.spec = {"HORA_LAUNCHER", SettingType::kString, "",
                "The launcher that started this rank (set by horarun): once it is gone, the rank "
                "ends itself (SIGTERM, then SIGKILL 5 s later)"},
       .as_string = &Config::launcher},
      {.spec = {"HORA_RANK", SettingType::kString, "", "This process's rank (set by horarun)",
                true}},
      {.spec = {"HORA_SIZE", SettingType::kString, "", "Number of ranks (set by horarun)", true}},
      {.spec = {"HORA_LOCAL_RANK", SettingType::kString, "", "Rank on this host (set by horarun)",
                true}},
      {.spec = {"HORA_LOCAL_SIZE", SettingType::kString, "", "Ranks on this host (set by horarun)",
                true}},
      {.spec = {"HORA_CROSS_RANK", SettingType::kString, "",
                "Index among the ranks with this local rank, one per host (set by horarun)", true}},
      {.spec = {"HORA_CROSS_SIZE", SettingType::kString, "",
                "Number of ranks with this local rank (set by horarun)", true}},
      {.spec = {"HORA_HOSTNAME", SettingType::kString, "",
                "Host name this rank was placed on (set by horarun)", true}},
  };
  return rows;
}

}  // namespace hora::config_internal
