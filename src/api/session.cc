// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "hora/session.h"

#include <unistd.h>

#include <cmath>
#include <sstream>
#include <utility>

#include "api/layout_exchange.h"
#include "api/process_connect.h"
#include "api/session_impl.h"
#include "api/settings_agreement.h"
#include "api/thread_world_impl.h"
#include "common/cores.h"
#include "common/horovod_env.h"
#include "mpi/mpi_loader.h"
#include "store/tcp_store_server.h"

namespace hora {
namespace {

// A hierarchy asked for in a job spanning hosts where none can run: it
// reduces within a host on the shared memory of Hora's default transport.
// Said once, by rank 0.
void WarnIfNoHierarchy(const Config& config, const RankLayout& layout, const Logger& logger) {
  const std::string& h = config.hierarchical_allreduce;
  if ((h != "1" && h != "one") || layout.rank != 0 || layout.local_size < 2 ||
      layout.local_size == layout.size) {
    return;
  }
  std::string why;
  if (config.backend != "hora") {
    why = "the MPI library runs them (HORA_BACKEND=" + config.backend + ")";
  } else if (config.transport == "tcp" || config.transport == "mpi") {
    why = "it reduces within a host on shared memory, which HORA_TRANSPORT=" + config.transport +
          " does not give (leave HORA_TRANSPORT unset)";
  } else {
    return;
  }
  logger.Warning("hierarchical allreduce is on (HORA_HIERARCHICAL_ALLREDUCE=" + h +
                 ") but allreduces run flat: " + why);
}

}  // namespace

Status CheckReduction(const Session::Impl& impl, const char* op, DataType dtype,
                      const Reduction& red, const std::string* name) {
  // (Formatted only on failure: a step may submit hundreds of calls.)
  auto where = [&] { return impl.Where(op) + (name ? " '" + *name + "'" : std::string()); };
  if (static_cast<int>(red.op) > static_cast<int>(ReduceOp::kAdasum)) {
    return InvalidArgument(where() + ": unknown reduce op " +
                           std::to_string(static_cast<int>(red.op)) +
                           " (a ReduceOp value out of range)");
  }
  // (A NaN would also differ from itself when ranks compare their calls.)
  for (const auto& [factor, which] : {std::pair{red.prescale_factor, "prescale_factor"},
                                      std::pair{red.postscale_factor, "postscale_factor"}}) {
    if (!std::isfinite(factor)) {
      std::ostringstream v;
      v << factor;
      return InvalidArgument(where() + ": " + which + " is " + v.str() +
                             "; scale factors must be finite numbers");
    }
  }
  if (red.op == ReduceOp::kAdasum) {
    if (std::string_view(op) != "allreduce") {
      return InvalidArgument(where() + ": Adasum is an allreduce op only");
    }
    if (!IsFloatingPoint(dtype)) {
      return InvalidArgument(where() + ": Adasum is defined for floating types, not " +
                             DataTypeName(dtype));
    }
  }
  if (dtype == DataType::kBool) {
    if (red.op == ReduceOp::kAverage) {
      return InvalidArgument(where() +
                             ": average is not defined for bool tensors "
                             "(use sum for logical OR, min/product for logical AND)");
    }
    if (red.prescale_factor != 1.0 || red.postscale_factor != 1.0) {
      return InvalidArgument(where() + ": bool tensors take no scale factors (got prescale " +
                             std::to_string(red.prescale_factor) + ", postscale " +
                             std::to_string(red.postscale_factor) + ")");
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<Session>> Session::Create(const SessionOptions& options) {
  std::map<std::string, std::string> env;
  if (options.read_environment) env = ReadProcessEnvironment();
  for (const auto& [k, v] : options.settings) env[k] = v;
  // A Horovod user's HOROVOD_* settings, under the HORA_* ones.
  HorovodSettings horovod;
  if (options.read_environment) horovod = ReadHorovodSettings(ReadWholeEnvironment(), env);
  for (const auto& [k, v] : horovod.hora) env.emplace(k, v);
  Result<Config> read = ConfigFromEnv(env);
  if (!read.ok()) return InHorovodsNames(read.status(), horovod);
  Config config = std::move(*read);
  HORA_ASSIGN_OR_RETURN(Selector selector, Selector::Create(config));
  HORA_ASSIGN_OR_RETURN(GpuRouting gpu_routing, GpuRouting::FromConfig(config));

  std::unique_ptr<Impl> impl;
  RankLayout layout;
  // Ranks that meet in no store compare the settings that must agree over
  // the backend (ConnectProcess compares them in the store).
  bool compare_over_backend = false;
  std::shared_ptr<KeyRecordingStore> rendezvous_keys;  // (ranks as processes, with a store)
  if (options.world) {                                 // ranks as threads
    if (options.world->impl().asked < 1) {
      return InvalidArgument("ThreadWorld::Create(" + std::to_string(options.world->impl().asked) +
                             "): a world needs one rank or more");
    }
    const int size = options.world->size();
    if (options.rank < 0 || options.rank >= size) {
      return InvalidArgument("rank " + std::to_string(options.rank) + " is outside [0, " +
                             std::to_string(size) + ")");
    }
    ThreadWorld::Impl& world = options.world->impl();
    // (A rank of the world that makes no Session within the start's bound
    // fails what this one waits for, naming it, as a process that never
    // came fails the rendezvous.)
    std::unique_ptr<Transport> transport =
        world.hub->ConnectIfFree(options.rank, SecondsToDuration(config.start_timeout_s));
    if (transport == nullptr) {
      return InvalidArgument("rank " + std::to_string(options.rank) +
                             " has a Session in this ThreadWorld already (one at a time a rank: "
                             "destroy it first)");
    }
    impl = std::make_unique<Impl>(std::move(config), world.store, std::move(transport),
                                  std::move(selector));
    layout = {options.rank, size, options.rank, size, 0, 1, "threads"};
    // (Ranks as threads are made one after another by one program, with
    // its settings: they compare none, which would wait for the next.)
  } else {  // ranks as processes: the layout comes from the launcher
    std::map<std::string, std::string> whole = ReadWholeEnvironment();
    for (const auto& [k, v] : options.settings) whole[k] = v;
    HORA_ASSIGN_OR_RETURN(layout, RankLayoutFromEnv(whole));
    const bool elastic = !config.worker_id.empty();  // (its layout comes from the store)
    if (config.bind_to == "core" && elastic) {
      Logger(config.log_level, layout.rank)
          .Warning(
              "HORA_BIND_TO=core is not applied in an elastic job (a worker's local rank "
              "changes with each world)");
    } else if (config.bind_to == "core") {  // before a transport reads the mask
      std::string note;
      Result<bool> bound = BindToCore(layout.local_rank, layout.local_size, &note);
      if (!bound.ok()) return bound.status().WithContext("rank " + std::to_string(layout.rank));
      // (Asked for and not done: said once a host, by its first rank.)
      if (!*bound && layout.local_rank == 0) {
        Logger(config.log_level, layout.rank).Warning(note);
      } else {
        Logger(config.log_level, layout.rank).Info(note);
      }
    }
    if (elastic && (config.transport == "mpi" || config.backend != "hora")) {
      return InvalidArgument("an elastic job (HORA_WORKER_ID=" + config.worker_id +
                             ") runs on Hora's own transports and backend, not MPI's (its world "
                             "is fixed): unset HORA_TRANSPORT=mpi / HORA_BACKEND");
    }
    if (config.transport == "mpi" || (config.backend != "hora" && config.transport.empty())) {
      // Everything comes from MPI: no store, no sockets.
      HORA_ASSIGN_OR_RETURN(MpiLibrary * mpi, LoadMpiPlugin(config, whole));
      HORA_ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport, mpi->CreateTransport());
      impl = std::make_unique<Impl>(std::move(config), std::make_shared<MemoryStore>(),
                                    std::move(transport), std::move(selector));
      compare_over_backend = true;  // (no store to compare in)
    } else if (layout.size == 1 && !elastic) {
      auto hub = LoopbackHub::Create(1);
      impl = std::make_unique<Impl>(std::move(config), std::make_shared<MemoryStore>(),
                                    hub->Connect(0), std::move(selector));
    } else {
      Logger logger(config.log_level, layout.rank);
      HORA_ASSIGN_OR_RETURN(ProcessWiring wiring, ConnectProcess(config, whole, logger));
      rendezvous_keys = wiring.rendezvous_keys;
      layout = wiring.layout;  // (an elastic worker's, from the store)
      impl = std::make_unique<Impl>(std::move(config), std::move(wiring.store),
                                    std::move(wiring.transport), std::move(selector),
                                    layout.local_size < layout.size);
      impl->store_server = std::move(wiring.server);
      impl->mpi = wiring.mpi;
      impl->hosts_known = {wiring.hosts_added_known, wiring.hosts_removed_known};
      impl->elastic_generation = wiring.elastic_generation;
    }
  }
  impl->layout = layout;
  WarnIfNoHierarchy(impl->config, layout, impl->logger);
  if (!options.world)
    impl->launcher_watch = LauncherWatch::Start(impl->config.launcher, impl->logger);
  if (impl->mpi == nullptr && (impl->config.transport == "mpi" || impl->config.backend != "hora")) {
    // The same plugin, for what MPI provided (the thread level).
    if (auto mpi = LoadMpiBootstrap(impl->config, ReadWholeEnvironment()); mpi.ok()) {
      impl->mpi = *mpi;
    }
  }
  if (impl->config.backend != "hora") {
    if (options.world) {
      return InvalidArgument("HORA_BACKEND=" + impl->config.backend +
                             " needs ranks as processes started by an MPI launcher, not threads");
    }
    HORA_ASSIGN_OR_RETURN(MpiLibrary * mpi, LoadMpiPlugin(impl->config, ReadWholeEnvironment()));
    const WaitPolicy waits = WaitPolicy::FromConfig(impl->config, &impl->logger);
    const bool blocking = impl->config.backend == "mpi-blocking";
    HORA_ASSIGN_OR_RETURN(impl->backend, mpi->CreateBackend(waits, blocking));
    // The global set's engine too (other process sets run Hora's algorithms
    // over the MPI transport).
    HORA_ASSIGN_OR_RETURN(std::unique_ptr<CollectiveBackend> set_backend,
                          mpi->CreateBackend(waits, blocking));
    impl->logger.Info("collectives by " + mpi->version());
    MutexLock lock(impl->engine_mu);  // (no other thread yet, but `sets` is the lock's)
    impl->sets[0]->backend = std::move(set_backend);
  }
  impl->gpu_routing = std::move(gpu_routing);
  // (The comparison's allgathers must take the same path on every rank
  // whatever the settings compared: ranks compare here only over MPI's
  // transport, whose Comm has no window and no in-place reads, so
  // HORA_ALLGATHER_ALGO cannot change it; HORA_BLOCKS_AT_ONCE is taken
  // after it, below.)
  if (compare_over_backend && impl->comm.size() > 1) {
    HORA_RETURN_IF_ERROR(CompareSettingsOver(*impl->backend, impl->comm.rank(), impl->comm.size(),
                                             AgreedSettings(impl->config)));
  }
  // Only once the ranks agree on it: the comparison above runs allgathers
  // on this Comm, which ranks that disagreed would post differently.
  impl->comm.SetBlocksAtOnce(BlocksAtOnceOf(impl->config));
  // (Ranks as threads are one host, as their layout says.)
  if (!options.world && impl->comm.size() > 1) {
    HORA_RETURN_IF_ERROR(
        ExchangeLayout(*impl->backend, impl->comm.rank(), impl->comm.size(), &impl->layout));
  }
  // Every rank took part in that: all have connected, and read the
  // rendezvous keys they needed. Each deletes those it set (a store
  // outliving Sessions, horarun's, would hold every Session's otherwise).
  if (rendezvous_keys) {
    const size_t n = rendezvous_keys->DeleteRecorded();
    impl->logger.Debug("rank " + std::to_string(impl->comm.rank()) + ": deleted the " +
                       std::to_string(n) + " rendezvous keys it set");
  }
  {
    // The global set's engine starts with the Session, on every rank: a
    // rank busy elsewhere (loading data) still negotiates, so that a rank
    // waiting for it learns it is alive and which tensors it lacks.
    MutexLock lock(impl->engine_mu);
    StartEngine(*impl, *impl->sets[0]);
  }
  impl->logger.Info("rank " + std::to_string(impl->comm.rank()) + " of " +
                    std::to_string(impl->comm.size()) + " connected over " +
                    impl->transport->name());
  auto session = std::unique_ptr<Session>(new Session(std::move(impl)));
  if (!session->impl_->config.timeline.empty()) {
    const Status timeline = session->StartTimeline(session->impl_->config.timeline);
    if (!timeline.ok()) {
      // The others, connected, fail as this Session ends ("rank 0 shut its
      // Session down"): horarun names this rank's own failure first.
      session->ReportFailure(timeline.ToString());
      return timeline;
    }
  }
  if (session->rank() == 0) {  // (once per job: every rank reads the same environment)
    std::string taken;
    for (const auto& t : horovod.taken) taken += (taken.empty() ? "" : "; ") + t;
    if (!taken.empty()) session->impl_->logger.Info("Horovod's settings: " + taken);
    for (const auto& notice : horovod.ignored) session->impl_->logger.Warning(notice);
  }
  for (const auto& name : UnknownSettings(env)) {
    session->impl_->logger.Warning("unknown setting " + name +
                                   " ignored (see --print-config for the list)");
  }
  return session;
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() {
  // A forked child leaves the Session to its parent: its threads are the
  // parent's, and closing it would close the parent's connections too.
  if (impl_ == nullptr) return;
  if (impl_->fork_witness.InChild()) {
    (void)impl_.release();
    return;
  }
  ReportSilentPeer(*impl_);
}

Status ForkedChildError(const Session::Impl& impl, const char* op) {
  if (!impl.fork_witness.InChild()) return Status::Ok();
  return InvalidArgument(impl.Where(op) + ": this process (pid " + std::to_string(getpid()) +
                         ") was forked from rank " + std::to_string(impl.comm.rank()) +
                         "'s process (pid " + std::to_string(impl.fork_witness.owner()) +
                         ") after init(); a forked child cannot run collectives or shut Hora "
                         "down, only the process that called init() can (rank(), size() and "
                         "the other queries work here)");
}

int Session::rank() const { return impl_->comm.rank(); }
int Session::size() const { return impl_->comm.size(); }
int Session::local_rank() const { return impl_->layout.local_rank; }
int Session::local_size() const { return impl_->layout.local_size; }
int Session::cross_rank() const { return impl_->layout.cross_rank; }
int Session::cross_size() const { return impl_->layout.cross_size; }
bool Session::is_homogeneous() const { return impl_->layout.homogeneous; }

Result<uint64_t> Session::GpuStream(int device) {
  const Status st = impl_->devices.Get(device).status();
  if (!st.ok()) return st.WithContext(impl_->Where("GpuStream"));
  return impl_->devices.stream().id;
}
std::string Session::DescribeConfig() const { return FormatConfig(impl_->config); }

Tensor Session::NewOutput(DataType dtype, std::vector<int64_t> shape) const {
  return impl_->output_pool->Take(dtype, std::move(shape));
}
bool Session::mpi_enabled() const { return impl_->mpi != nullptr; }
bool Session::mpi_threads_supported() const {
  return impl_->mpi != nullptr && impl_->mpi->thread_multiple();
}

Status Session::Allreduce(const TensorView& input, const TensorView& output,
                          const Reduction& reduction) {
  HORA_RETURN_IF_ERROR(ForkedChildError(*impl_, "allreduce"));
  if (OnGpu(input) || OnGpu(output)) {
    return AllreduceAsync("", input, output, reduction).Wait(kWaitAsLongAsItTakes);
  }
  HORA_RETURN_IF_ERROR(CheckTensor(*impl_, "allreduce", "input", input));
  HORA_RETURN_IF_ERROR(CheckReduction(*impl_, "allreduce", input.dtype(), reduction));
  Status bad_output = CheckTensor(*impl_, "allreduce", "output", output);
  if (bad_output.ok() &&
      (input.dtype() != output.dtype() || input.num_elements() != output.num_elements())) {
    bad_output = InvalidArgument(impl_->Where("allreduce") + ": output " + output.Describe() +
                                 " does not match input " + input.Describe());
  }
  if (!bad_output.ok()) {
    // The input is fine: this rank still takes part, into memory of its
    // own, so that the others' call completes and their next ones line up
    // with this rank's (they would meet this rank's next call otherwise).
    Tensor scratch = Tensor::Uninitialized(input.dtype(), input.shape());
    AllreduceArgs args{input.data(), scratch.data(), input.num_elements(), input.dtype(),
                       reduction};
    HORA_RETURN_IF_ERROR(impl_->backend->Allreduce(args));
    return bad_output;
  }
  AllreduceArgs args{input.data(), output.data(), input.num_elements(), input.dtype(), reduction};
  return impl_->backend->Allreduce(args);
}

Status Session::Broadcast(const TensorView& tensor, int root) {
  HORA_RETURN_IF_ERROR(ForkedChildError(*impl_, "broadcast"));
  if (OnGpu(tensor)) return BroadcastAsync("", tensor, root).Wait(kWaitAsLongAsItTakes);
  HORA_RETURN_IF_ERROR(CheckTensor(*impl_, "broadcast", "tensor", tensor));
  if (root < 0 || root >= size()) {
    return InvalidArgument(impl_->Where("broadcast") + ": root rank " + std::to_string(root) +
                           " is outside [0, " + std::to_string(size()) + ")");
  }
  return impl_->backend->Broadcast(tensor.data(), tensor.num_bytes(), root);
}

Status Session::Barrier() {
  HORA_RETURN_IF_ERROR(ForkedChildError(*impl_, "barrier"));
  return impl_->backend->Barrier();
}

}  // namespace hora
