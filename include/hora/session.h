// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Session: everything one rank of one job owns (configuration, rendezvous
// store, transports, algorithm selection). There is no process-global state:
// several Sessions may live in one process, which is how tests run N ranks as
// N threads.
//
// Collectives on a Session are blocking and follow MPI's rules: every rank of
// the session calls the same collectives in the same order with matching
// arguments (same dtype, same element counts where counts must agree). A
// disagreement in sizes fails with an error naming each rank's size; the
// others (the op or scale factors, dtypes of one size, a broadcast's root)
// are not compared on every path, as in MPI, so that a call costs no
// exchange more (ranks sharing a window compare the dtype and a broadcast's
// root; two ranks over TCP or point to point do not, and a broadcast whose
// ranks name different roots then waits, or each keeps its own data): the
// *Async calls compare every parameter. A rank that
// is lost (its process ended, its connection closed, or it was silent for
// HORA_PEER_TIMEOUT_S) fails the others' collectives at once with an error
// naming it; one that is alive but has not arrived is waited for, the wait
// reported every HORA_STALL_WARNING_S, and fails only once HORA_TIMEOUT_S
// has passed, where a user sets it (docs/faults.md). A blocking call that
// fails this rank's own checks returns their error without taking part
// (the others' calls then meet this rank's next one: do not go on), except
// where it can take part all the same: an allreduce or an allgather,
// reducescatter or alltoall into a given output whose only fault is that
// output runs into memory of its own, so the others' complete. The *Async
// calls (the engine) instead fail the call on every rank, naming this
// rank's error.
//
// Thread-safety: one thread at a time may call a given Session's collectives.
// Different Sessions are independent.
//
// Example (ranks as threads):
//   auto world = hora::ThreadWorld::Create(4);
//   // on thread r:
//   auto session = hora::Session::Create({.rank = r, .world = world});
//   float x[3] = {...};
//   auto v = hora::TensorView::Flat(x, hora::DataType::kFloat32, 3);
//   Status st = (*session)->Allreduce(v, v, {hora::ReduceOp::kAverage});
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hora/handle.h"
#include "hora/status.h"
#include "hora/tensor.h"
#include "hora/thread_world.h"
#include "hora/types.h"

namespace hora {

struct SessionOptions {
  // Ranks as threads: this thread's rank in [0, world->size()).
  int rank = -1;
  // Ranks as threads: the shared in-process world (its size is the job size).
  // When null, ranks are processes: the rank layout is read from the
  // launcher's environment (horarun, mpirun, srun, torchrun; see
  // src/launch/rank_layout.h) and `rank` is ignored. A process started by no
  // launcher is a job of one rank.
  std::shared_ptr<ThreadWorld> world;
  // HORA_* settings. When `read_environment` is true they are layered over the
  // process environment (these win); otherwise only these are used.
  std::map<std::string, std::string> settings;
  bool read_environment = true;
};

class Session {
 public:
  // Reads the configuration once and connects to the other ranks. Fails with
  // InvalidArgument naming the variable, value and accepted values when a
  // HORA_* setting is invalid.
  static Result<std::unique_ptr<Session>> Create(const SessionOptions& options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int rank() const;
  int size() const;
  // Place on the host: rank among the ranks of this host and their number
  // (from the launcher); the host's index among the hosts that have a rank
  // with this local rank, in rank order, and their number, gathered from
  // every rank when the Session starts (Horovod's local_rank, local_size,
  // cross_rank, cross_size: with hosts of 2 and 1 ranks, local rank 1's
  // cross_size is 1). Ranks as threads are one host.
  int local_rank() const;
  int local_size() const;
  int cross_rank() const;
  int cross_size() const;
  // Every host runs the same number of ranks (Horovod's is_homogeneous).
  bool is_homogeneous() const;

  // GPU tensors (a TensorView on cuda:N; docs/guide/gpu.md) go to every collective
  // below. Their memory must stay valid until the collective is done, as a
  // host tensor's. The stream (a cudaStream_t) on which this rank works on
  // its GPU `device` (opened now if need be): a tensor whose producing work
  // is still queued on another stream may be submitted once this stream
  // waits for that work (cudaEventRecord there, cudaStreamWaitEvent here),
  // and the host need not wait for it. DLPack's stream argument does this
  // for Python's frameworks. (The collectives of a process set other than the
  // global one run on a stream of that set's own, which waits for this one
  // before each batch.)
  Result<uint64_t> GpuStream(int device = 0);

  // An elastic worker under horarun (HORA_WORKER_ID): how many times
  // horarun's host discovery has reported hosts or slots added, and
  // removed, so far; and how many of each this session's world already
  // reflects (it was formed after them). All 0 for any other session.
  // hvd.elastic's check_host_updates() reads it on rank 0
  // (docs/guide/elastic.md).
  struct HostUpdates {
    int64_t added = 0, removed = 0;
    int64_t added_known = 0, removed_known = 0;
  };
  Result<HostUpdates> ElasticHostUpdates();

  // Reduces `input` across ranks into `output` (same dtype and element count;
  // output may be input for an in-place reduction). See types.h for the
  // semantics of each op and scale factor. The algorithm comes from the
  // selector (cost model, or HORA_ALLREDUCE_ALGO).
  Status Allreduce(const TensorView& input, const TensorView& output,
                   const Reduction& reduction = {});

  // Concatenates every rank's tensor along dimension 0, in rank order.
  // Dimension 0 may differ between ranks; dtype and the other dimensions must
  // agree (a disagreement is a Mismatch error naming each rank's shape).
  Result<Tensor> Allgather(const TensorView& input);
  // The same into the caller's `output`: same dtype, as many elements as the
  // gathered rows hold (any shape), not overlapping `input` (refused with
  // InvalidArgument; the same for Reducescatter and Alltoall). Reusing one output
  // across calls saves the allocation and its first-touch page faults. An
  // output that does not fit is left unwritten and this rank returns
  // InvalidArgument naming both; it still takes part (into a temporary), so
  // the other ranks finish with their results. The same holds for the
  // `output` forms of Reducescatter and Alltoall. A GPU input's output must
  // be on the same GPU.
  Status Allgather(const TensorView& input, const TensorView& output);

  // Replaces `tensor` on every rank with root's.
  Status Broadcast(const TensorView& tensor, int root);

  // Reduces `input` across ranks and leaves rank r with its slice of
  // dimension 0: dim0 / size rows, the first dim0 % size ranks one more.
  Result<Tensor> Reducescatter(const TensorView& input, const Reduction& reduction = {});
  Status Reducescatter(const TensorView& input, const TensorView& output,
                       const Reduction& reduction = {});

  // Sends splits[p] rows (dimension 0) of `input`, in order, to each rank p;
  // returns the rows received from every rank, in rank order. Empty `splits`
  // means an even split (dim0 must then divide by size). When
  // `received_splits` is given it receives the row count from each rank.
  Result<Tensor> Alltoall(const TensorView& input, std::span<const int64_t> splits,
                          std::vector<int64_t>* received_splits = nullptr);
  Status Alltoall(const TensorView& input, std::span<const int64_t> splits,
                  const TensorView& output, std::vector<int64_t>* received_splits = nullptr);

  // Returns when every rank has entered the barrier.
  Status Barrier();

  // --- Through the engine (src/engine/engine.h): named, asynchronous ---
  // Each returns at once with a Handle. The engine runs a tensor when every
  // rank has submitted one of the same name, in whatever order ranks submit;
  // ranks that disagree on its parameters (dtype, shape, op, scale factors,
  // root) get an error on every rank naming the tensor and each rank's values,
  // and other tensors go on. Names must be unique among unfinished
  // collectives; an empty name is generated ("allreduce.noname.N", the same on
  // every rank for the N-th unnamed call). The global set's engine starts
  // with the Session, a process set's with AddProcessSet. Buffers stay the
  // caller's: valid and untouched until the handle is done.
  //
  // `process_set` (last argument of each) runs the call over the ranks of a
  // process set (see AddProcessSet); 0, the default, is every rank. Only
  // members may call; names are per set.
  Handle AllreduceAsync(const std::string& name, const TensorView& input, const TensorView& output,
                        const Reduction& reduction = {}, int process_set = 0);
  // `root` is a session rank (within the set for a process set).
  Handle BroadcastAsync(const std::string& name, const TensorView& tensor, int root,
                        int process_set = 0);
  // Allreduces of several tensors submitted as one group: they run only when
  // every member is ready on every rank, together (and may be fused with
  // each other; HORA_DISABLE_GROUP_FUSION=1 keeps them from fusing with other
  // work). Members are named "<group>.<i>". outputs[i] may be inputs[i].
  std::vector<Handle> GroupedAllreduceAsync(const std::string& group,
                                            std::span<const TensorView> inputs,
                                            std::span<const TensorView> outputs,
                                            const Reduction& reduction = {}, int process_set = 0);
  // Allgather, reducescatter and alltoall through the engine. Hora
  // allocates the output: Handle::output() once done (same contracts as the
  // blocking forms above; alltoall's received splits in
  // Handle::received_splits()). Ranks must agree on dtype and, for
  // reducescatter, the whole shape; for allgather and alltoall all but
  // dimension 0. Empty alltoall `splits`: an even split.
  Handle AllgatherAsync(const std::string& name, const TensorView& input, int process_set = 0);
  Handle ReducescatterAsync(const std::string& name, const TensorView& input,
                            const Reduction& reduction = {}, int process_set = 0);
  Handle AlltoallAsync(const std::string& name, const TensorView& input,
                       std::span<const int64_t> splits = {}, int process_set = 0);
  // Groups of allgathers / reducescatters, with the atomicity of
  // GroupedAllreduceAsync.
  std::vector<Handle> GroupedAllgatherAsync(const std::string& group,
                                            std::span<const TensorView> inputs,
                                            int process_set = 0);
  std::vector<Handle> GroupedReducescatterAsync(const std::string& group,
                                                std::span<const TensorView> inputs,
                                                const Reduction& reduction = {},
                                                int process_set = 0);
  Handle BarrierAsync(int process_set = 0);
  // A collective this rank's caller refused before handing it over (a
  // framework binding's own checks failed here: a dtype it does not take, a
  // root out of range): submits it as refused, so that it fails on every
  // rank once each has called it (this rank's handles with `error`, the
  // others' with a MismatchError quoting it, prefixed "rank R: ") instead
  // of leaving the others waiting for this rank. `collective` is the kind
  // the caller would have submitted: "allreduce", "broadcast", "allgather",
  // "reducescatter", "alltoall", or "grouped_allreduce",
  // "grouped_allgather", "grouped_reducescatter" with `group_size` members
  // named "<name>.<i>" (none for 0, as an empty group). `name` as in the
  // calls above (empty: the same generated name they would take).
  std::vector<Handle> RefuseAsync(std::string_view collective, const std::string& name,
                                  const Status& error, size_t group_size = 0, int process_set = 0);
  // This rank is out of data (uneven data across ranks). Until every rank
  // has joined, it takes part in the other ranks' allreduces with identity
  // values (0 for sum and average, 1 for product, +-inf or the dtype's
  // limits for min and max), and averages divide by every rank of the set,
  // joined ones included (as Horovod's). Other collectives submitted meanwhile fail with an
  // error naming the joined ranks. Completes when every rank has joined;
  // output() is then an int32 scalar: the last rank to join. Global set only.
  Handle JoinAsync();

  // --- Process sets: collectives over some of the ranks ---
  // Creates a set of `ranks` (session ranks, any order, no repeats) and
  // returns its id (> 0). The set's ranks are those sorted: its rank 0 is
  // the lowest session rank in it, as in Horovod (a broadcast's root is
  // still a session rank). A set of the same ranks as one that exists
  // (every rank: set 0) is refused, naming that set. Every rank of the session calls it, members or
  // not, with the same ranks, in the same order as its other process-set
  // calls; ranks that disagree all get an error naming rank 0's list and
  // each rank whose list differs, with it.
  // The set has an engine of its own (own cache, own thread), so work on
  // different sets runs at once. Messages from a set's engine name ranks by
  // their place in the set, after a "process set N (ranks ...)" prefix.
  // At most 30 sets (the global one included: 29 added) exist at once.
  Result<int> AddProcessSet(std::span<const int> ranks);
  // Removes set `id` (collective like AddProcessSet). Its unfinished work
  // fails; no call on the set may race with the removal.
  Status RemoveProcessSet(int id);
  // Every set this rank knows of, by id, with its ranks (0: every rank).
  std::map<int, std::vector<int>> ProcessSets() const;

  // Starts (or restarts, truncating) the engine's Chrome-trace timeline:
  // `path` on rank 0, or every rank's own file when it contains "{rank}"
  // (HORA_TIMELINE does the same at creation). An unwritable path or a
  // directory is an error naming it.
  Status StartTimeline(const std::string& path);
  Status StopTimeline();

  // Counters of this rank's engine for `process_set` (zero before it starts).
  // driven_cycles: cycles run by a thread waiting on a handle rather than by
  // the engine's own thread. name_records: tensor names the engine keeps a
  // record of (those in flight, and up to max(4096, the cache's capacity)
  // recently finished ones, for their next tensors). idle_wakeups: times the
  // engine's thread, idle, woke to see whether to join a cycle.
  // settings_taken: times autotuning (HORA_AUTOTUNE) changed this engine's
  // settings, the same count on every rank.
  // gpu_route_batches: GPU batches by the route that ran them (one_rank,
  // nccl, window, staged_chunks, staged: docs/guide/gpu.md); of them,
  // window_batches: allreduce batches reduced on the GPU in the ranks'
  // device windows (HORA_GPU_IPC) rather than staged through host memory;
  // nccl_batches: batches run by NCCL; one_rank_batches: allreduce and
  // broadcast batches of a one-rank set, run on its GPU alone.
  struct EngineCounters {
    uint64_t cycles = 0, slow_cycles = 0, coordinator_bytes = 0, cache_hits = 0, cache_misses = 0,
             cache_evictions = 0, cache_invalidations = 0, tensors = 0, fused_batches = 0,
             driven_cycles = 0, name_records = 0, carried_batches = 0, idle_wakeups = 0,
             window_batches = 0, nccl_batches = 0, one_rank_batches = 0, settings_taken = 0;
    std::map<std::string, uint64_t> gpu_route_batches;
    // The Session's output pool (NewOutput's, and the outputs of allgather,
    // reducescatter and alltoall), whatever the set: outputs given memory
    // a freed output left, and outputs given fresh memory (pooled sizes).
    uint64_t outputs_reused = 0, outputs_fresh = 0;
  };
  EngineCounters engine_counters(int process_set = 0) const;

  // Tells horarun that this rank is failing, with `what` (an exception's last
  // line), before the rank tears down, so that horarun names the rank whose
  // own failure came first rather than a peer that failed because of it;
  // `caused_by_peer`: the failure is of the kind a peer causes (a lost
  // connection, a peer's Session shut down), and is reported as such, never
  // named first, where this Session saw a peer go. Best effort: nothing
  // without horarun's store (HORA_JOB_ID), or in a process forked from this
  // Session's.
  void ReportFailure(const std::string& what, bool caused_by_peer = false);

  // The effective configuration, one "NAME=value  # doc" line per setting.
  std::string DescribeConfig() const;

  // An uninitialised host tensor for the output of an out-of-place
  // collective (an allreduce's output, say), from this Session's pool: the
  // memory of an output whose tensor was destroyed, already faulted in, where
  // one fits, so that a large output does not fault every page on each call.
  // Its memory goes back to the pool when the tensor is destroyed (on any
  // thread; the tensor may outlive the Session); at most
  // HORA_OUTPUT_POOL_BYTES is kept unused.
  Tensor NewOutput(DataType dtype, std::vector<int64_t> shape) const;

  // Whether this job initialised or uses MPI: its transport or backend, or
  // the rendezvous of a job started by an MPI launcher without horarun
  // (Horovod's mpi_enabled). And whether MPI provided
  // MPI_THREAD_MULTIPLE (Horovod's mpi_threads_supported); false without MPI.
  bool mpi_enabled() const;
  bool mpi_threads_supported() const;

  // What the Session owns: a type of Hora's own code (api/session_impl.h),
  // which its tests reach through impl().
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hora
