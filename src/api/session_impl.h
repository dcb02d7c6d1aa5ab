// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// What a Session owns. Collective entry points live in session.cc (the
// blocking fixed-size collectives), session_shape_exchange.cc (the blocking
// ones that exchange shapes first), session_async.cc and
// session_async_allocated.cc (the engine's asynchronous ones, which begin in
// engine_calls.cc) and session_process_sets.cc (process sets).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "api/launcher_watch.h"
#include "api/process_set_state.h"
#include "backends/backend.h"
#include "backends/device_choice.h"
#include "backends/hora_backend.h"
#include "collectives/comm.h"
#include "collectives/selector.h"
#include "common/config.h"
#include "common/fork_witness.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "common/output_pool.h"
#include "device/gpu_routing.h"
#include "device/nccl_order.h"
#include "engine/engine.h"
#include "gpu/lazy_device.h"
#include "hora/session.h"
#include "launch/rank_layout.h"
#include "mpi/mpi_plugin.h"
#include "store/store.h"
#include "store/tcp_store_server.h"
#include "transport/transport.h"

namespace hora {

struct Session::Impl {
  // `spans_hosts`: the job's ranks are on more than one host (its layout's
  // local size below its size, which every rank sees alike).
  Impl(Config c, std::shared_ptr<Store> s, std::unique_ptr<Transport> t, Selector sel,
       bool spans_hosts = false)
      : config(std::move(c)),
        logger(config.log_level, t->rank()),
        store(std::move(s)),
        transport(std::move(t)),
        comm(*transport, WaitPolicy::FromConfig(config, &logger), config.ring_segment_bytes, 0),
        backend(CreateHoraBackend(comm, sel)),
        selector(sel),
        devices(config.device, ChooseDevice(config.device)) {
    std::vector<int> all(static_cast<size_t>(transport->size()));
    for (size_t r = 0; r < all.size(); ++r) all[r] = static_cast<int>(r);
    sets[0] = std::make_shared<ProcessSetState>(0, std::move(all), 0, *transport, config, sel,
                                                &logger, spans_hosts);
    global = sets[0].get();
  }
  ~Impl() {
    // The store this rank serves (rank 0 under a foreign launcher) closes
    // first: nothing uses it after the start, and a rank that starts its next
    // Session once this one's engines stopped must find the next server, not
    // this one.
    store_server.reset();
    sets.clear();  // stops the engine threads before what they use goes
  }

  const Config config;
  // Host memory for out-of-place outputs (Session::NewOutput).
  const std::shared_ptr<OutputPool> output_pool = OutputPool::Create(config.output_pool_bytes);
  // The process that made this Session. A child forked from it after that
  // shares its sockets and shared memory but none of its threads: it must
  // neither use the Session nor tear it down (ForkedChildError).
  const ForkWitness fork_witness;
  RankLayout layout;  // local and cross ranks (set once by Session::Create)
  Logger logger;
  std::unique_ptr<TcpStoreServer> store_server;   // rank 0 under a foreign launcher
  std::unique_ptr<LauncherWatch> launcher_watch;  // ranks that horarun started on this host
  // The MPI plugin, when this job uses MPI (its transport or backend, or
  // the rendezvous under an MPI launcher); MPI is then initialised.
  MpiBootstrap* mpi = nullptr;
  std::shared_ptr<Store> store;
  // An elastic worker: horarun's host-update counts its world reflects
  // (added, removed; Session::ElasticHostUpdates).
  std::pair<int64_t, int64_t> hosts_known{0, 0};
  int64_t elastic_generation = 0;  // an elastic worker's world (0: not elastic)
  std::unique_ptr<Transport> transport;
  Comm comm;
  // Hora's algorithms over `comm`, or MPI's collectives (HORA_BACKEND=mpi).
  std::unique_ptr<CollectiveBackend> backend;

  // The engines (async, named collectives), one per process set this rank
  // belongs to, each in tag contexts of its own (see ProcessSetState), so
  // that they and the direct calls above run at once. Set 0 is the global
  // set; each engine starts with its set (the global one with the Session),
  // on every member: an engine stops with a last cycle among every member.
  const Selector selector;
  // The GPU of this rank's GPU tensors, opened at the first (internally
  // synchronised; the engines stage through it).
  mutable gpu::LazyDevice devices;
  // The order of this rank's NCCL calls across its process sets' engines
  // (device/nccl_order.h), which it outlives.
  NcclOrder nccl_order;
  // How GPU tensors' batches are routed (device/gpu_routing.h).
  GpuRouting gpu_routing;
  // Also guards each set's engine start and its name counters (unnamed,
  // unnamed_groups), which the analysis cannot see through the set.
  Mutex engine_mu;
  // One AddProcessSet or RemoveProcessSet at a time on this rank (they
  // exchange with the other ranks outside engine_mu).
  Mutex set_changes_mu;
  std::map<int, std::shared_ptr<ProcessSetState>> sets HORA_GUARDED_BY(engine_mu);
  // sets[0], the global set: it lives as long as the Session, and has its
  // engine from Session::Create on. A named call on it looks nothing up
  // and takes no lock (BeginEngineCall): most calls are those.
  ProcessSetState* global = nullptr;
  int next_set_id HORA_GUARDED_BY(engine_mu) = 1;
  std::shared_ptr<Timeline> timeline HORA_GUARDED_BY(engine_mu);

  std::string Where(const char* op) const {
    return "rank " + std::to_string(comm.rank()) + ": " + op;
  }
};

// An elastic worker whose world was lost by a peer's silence (its process
// stopped or frozen: Transport::SilentPeer) tells horarun which, through
// the store (launch/elastic_place.h ElasticSilentKey), as its Session ends:
// horarun then stops that worker, which the next world would wait for.
void ReportSilentPeer(Session::Impl& impl);

// In a child forked from the Session's process after the Session started:
// the error of `op` (the queries, rank() and size(), still work there).
// Ok in the Session's own process.
Status ForkedChildError(const Session::Impl& impl, const char* op);

// The timeline file of `rank` for HORA_TIMELINE=`path`: "{rank}" replaced by
// the rank, or, without it, `path` on rank 0 and none ("") elsewhere.
std::string TimelinePathFor(const std::string& path, int rank);

// Rejects reductions that are not defined for `dtype` (bool: no average, no
// scale factors). The message starts with "rank R: <op>", then the
// tensor's `name` where there is one (engine calls).
Status CheckReduction(const Session::Impl& impl, const char* op, DataType dtype,
                      const Reduction& reduction, const std::string* name = nullptr);

// Engine submissions (session_async.cc). An engine call on process set
// `set_id`: the set, its engine, and the call's name: `name`, or for
// an empty one "<op>.noname.<N>" (the same on every rank of the set for its
// N-th such call, and then not cacheable). When the set does not exist or
// this rank is not in it, `status` says so (starting with `Where`).
struct EngineCall {
  Session::Impl* impl = nullptr;
  ProcessSetState* set = nullptr;
  std::shared_ptr<ProcessSetState> holds;  // `set`, unless it is the global one
  Engine* engine = nullptr;                // the set's engine (null when `status` is an error)
  // The call's name: the caller's `name` (not copied: a step submits
  // hundreds of these), or one made for it.
  const std::string& name() const { return given != nullptr ? *given : made; }
  const std::string* given = nullptr;
  std::string made;
  bool cacheable = true;
  OpType op = OpType::kAllreduce;
  Status status;
  // Submits `s` (cacheable filled in here, and the name where `s` has none:
  // callers that set it use this call's name). After an error of the
  // caller's checks (`st`), submits the refusal instead (RefusalOf): the
  // call fails on every rank once each has submitted it, naming this rank's
  // error. After an error of the call's own (`status`: no such set, not a
  // member, a forked child), returns a failed handle.
  Handle Submit(Status st, Submission&& s) const;
  Engine& GetEngine() const { return *engine; }
};
// `name` must outlive the call (the call refers to it).
EngineCall BeginEngineCall(Session::Impl& impl, int set_id, const std::string& name, OpType op)
    HORA_EXCLUDES(impl.engine_mu);
EngineCall BeginEngineCall(Session::Impl& impl, int set_id, std::string&& name, OpType op) = delete;
// What a rank submits for a call it refused with `error` (see
// EngineCall::Submit): the call's name, kind and group, no data.
Submission RefusalOf(OpType op, const Status& error, const std::string* name, bool cacheable,
                     const RequestMeta& group_of);
// Starts `set`'s engine unless it runs: on every member at once, with the
// set.
void StartEngine(Session::Impl& impl, ProcessSetState& set) HORA_REQUIRES(impl.engine_mu);
// "rank R: <op> '<name>'", the start of every error about an engine call.
std::string Where(const Session::Impl& impl, OpType op, const std::string& name);
// Submits `count` members named "<group>.<i>" as one group on set `set_id`;
// `prepare` fills member i. When one member is bad, every handle fails with
// its error.
std::vector<Handle> SubmitGroup(
    Session::Impl& impl, int set_id, OpType op, const std::string& kind, const std::string& group,
    size_t count,
    const std::function<Status(size_t, const std::string&, bool, Submission*)>& prepare)
    HORA_EXCLUDES(impl.engine_mu);

// The rows of dimension 0 that `input` sends to each of `n` ranks: `splits`
// (checked: n of them, none negative, adding up to dimension 0), or an even
// split when `splits` is empty. Errors start with `where`.
Status AlltoallRows(const std::string& where, const TensorView& input,
                    std::span<const int64_t> splits, size_t n, std::vector<int64_t>* rows);

// The blocking collectives take GPU tensors through the global set's engine,
// which stages them (device/device_staging.h), and wait for it: the engine
// bounds every wait of its own.
inline bool OnGpu(const TensorView& t) { return t.device().type == DeviceType::kCUDA; }
inline constexpr std::chrono::nanoseconds kWaitAsLongAsItTakes = std::chrono::nanoseconds::max();
// Waits for `h` and moves its output out.
Result<Tensor> WaitForOutput(Handle h);
// The blocking forms that write into a caller's output, for a GPU input:
// `result` is what the form that returns the result gave (on the GPU); it
// is copied into `output`, which must be on the same GPU and fit it. (The
// collective ran on every rank whatever is wrong with this rank's output:
// that fails this rank's call only, as on the host.)
Status IntoGpuOutput(Session::Impl& impl, const char* op, const TensorView& input,
                     const TensorView& output, Result<Tensor> result);

// For a tensor on a GPU: that it is in memory of this rank's GPU (opened
// now if it is the first). The error names nothing of the call.
Status DeviceMemoryStatus(const Session::Impl& impl, const TensorView& tensor);
// The same, its error naming the tensor after `where()` (a callable giving
// a std::string: called only on failure, since a GPU step may submit
// hundreds of tensors, and a string built for each costs their latency).
template <typename Where>
Status CheckDeviceMemory(const Session::Impl& impl, const Where& where, const TensorView& tensor) {
  if (tensor.device().type != DeviceType::kCUDA) return Status::Ok();
  const Status st = DeviceMemoryStatus(impl, tensor);
  if (st.ok()) return st;
  return st.WithContext(where() + ": " + tensor.Describe());
}

// `tensor.Validate()`, with "rank R: <op> <which>: " before any error.
inline Status CheckTensor(const Session::Impl& impl, const char* op, const char* which,
                          const TensorView& tensor) {
  Status st = tensor.Validate();
  if (st.ok()) return st;
  return st.WithContext(impl.Where(op) + " " + which);
}

}  // namespace hora
