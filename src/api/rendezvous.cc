// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "api/rendezvous.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include <unistd.h>

#include "launch/slurm.h"
#include "mpi/mpi_loader.h"
#include "net/auth.h"
#include "net/socket.h"
#include "store/tcp_store_client.h"
#include "transport/tcp/tcp_mesh.h"

namespace hora {
namespace {

constexpr const char* kMpiMessageTag = "hora-mpi-bootstrap-1";

std::string Get(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

std::string WithPort(const std::string& host, uint16_t port) {
  const bool bare_v6 = host.find(':') != std::string::npos && host.front() != '[';
  return (bare_v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string Seconds(double s) { return std::to_string(static_cast<long long>(s + 0.5)) + " s"; }

// The time left until `deadline`, at least 1 ns: a wait given it tries once
// more instead of reading zero as "no limit".
Duration Left(TimePoint deadline) { return std::max(deadline - Clock::now(), Duration{1}); }

// torchrun: MASTER_PORT is torch's own store; Hora serves one port above.
Result<std::string> TorchrunStoreAddr(const std::map<std::string, std::string>& env) {
  const std::string master_port = Get(env, "MASTER_PORT");
  char* end = nullptr;
  const long port = std::strtol(master_port.c_str(), &end, 10);
  if (master_port.empty() || master_port[0] < '0' || master_port[0] > '9' || *end != '\0' ||
      port < 1 || port > 65534) {
    return InvalidArgument("MASTER_PORT='" + master_port +
                           "' is not a port below 65535 (Hora's store listens one port above "
                           "it); or set HORA_STORE_ADDR=host:port");
  }
  return WithPort(Get(env, "MASTER_ADDR"), static_cast<uint16_t>(port + 1));
}

struct SlurmStep {
  std::string job, step, nodelist;
};

// The step's ids and host list when srun started this process.
std::optional<SlurmStep> SlurmStepFromEnv(const std::map<std::string, std::string>& env) {
  SlurmStep s{Get(env, "SLURM_JOB_ID"), Get(env, "SLURM_STEP_ID"), Get(env, "SLURM_STEP_NODELIST")};
  if (s.nodelist.empty()) s.nodelist = Get(env, "SLURM_JOB_NODELIST");
  if (s.job.empty() || s.step.empty() || s.nodelist.empty() || !env.count("SLURM_PROCID")) {
    return std::nullopt;
  }
  return s;
}

// MPI's part: rank 0 picks what is missing of the address and secret
// (starting the store server when it picks the address) and broadcasts both.
Status MpiBootstrapRendezvous(MpiBootstrap& mpi, const Config& config, const RankLayout& l,
                              TimePoint deadline, Rendezvous* rv) {
  // A timeout names the wait; other errors keep MPI's words.
  const auto waited = [&](const Status& st, const std::string& what) {
    if (st.code() != StatusCode::kTimeout) return st.WithContext(what);
    return TimeoutError(
        what + " did not finish within HORA_START_TIMEOUT_S=" + Seconds(config.start_timeout_s) +
        ": it waits for every rank of the MPI job to start Hora (hvd.init(), "
        "Session::Create); is a rank late or stuck before it? (" +
        st.message() + ")");
  };
  Result<MpiLibrary*> lib = mpi.Open(Left(deadline));
  if (!lib.ok()) return waited(lib.status(), "MPI_Init");
  if ((*lib)->rank() != l.rank || (*lib)->size() != l.size) {
    return UnavailableError(
        "MPI_COMM_WORLD has this process as rank " + std::to_string((*lib)->rank()) + " of " +
        std::to_string((*lib)->size()) + ", but the launcher's variables (" + l.source +
        ") as rank " + std::to_string(l.rank) + " of " + std::to_string(l.size));
  }
  std::string message;
  if (l.rank == 0) {
    if (rv->secret.empty()) {
      HORA_ASSIGN_OR_RETURN(rv->secret, net::RandomHex(32));
    }
    if (rv->store_addr.empty()) {
      // One host: loopback only. Otherwise the address the other hosts
      // reach (HORA_IFACE, or the first non-loopback interface), every
      // interface listening.
      const bool one_host = l.local_size == l.size && config.iface.empty();
      std::string host = "127.0.0.1";
      if (!one_host) {
        HORA_ASSIGN_OR_RETURN(host, AdvertisedAddress(config.iface));
      }
      HORA_ASSIGN_OR_RETURN(
          rv->server, TcpStoreServer::Start(one_host ? host : "", 0, rv->secret, std::nullopt));
      rv->store_addr = WithPort(host, rv->server->port());
    }
    message = std::string(kMpiMessageTag) + "\n" + rv->store_addr + "\n" + rv->secret;
  }
  Status st = mpi.Broadcast(&message, 0, Left(deadline));
  if (!st.ok()) {
    return waited(st, "receiving the rendezvous address and job secret from rank 0 (MPI_Ibcast)");
  }
  if (l.rank != 0) {
    const size_t a = message.find('\n');
    const size_t b = a == std::string::npos ? a : message.find('\n', a + 1);
    if (b == std::string::npos || message.substr(0, a) != kMpiMessageTag) {
      return UnavailableError("rank 0 sent no Hora bootstrap message over MPI (another version?)");
    }
    rv->store_addr = message.substr(a + 1, b - a - 1);
    rv->secret = message.substr(b + 1);
  }
  rv->mpi = &mpi;
  return Status::Ok();
}

// Connects with the secret in `secret_path`, read again after a refused
// attempt: a file left by an earlier job under the same name may be read
// before rank 0 replaces it.
Result<std::unique_ptr<TcpStoreClient>> ConnectWithSecretFile(const net::HostPort& hp,
                                                              const std::string& secret_path,
                                                              TimePoint deadline,
                                                              std::string* secret) {
  for (;;) {
    auto client = TcpStoreClient::Connect(hp, *secret, Left(deadline));
    if (client.ok() || Clock::now() >= deadline) return client;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Result<std::string> again = ReadJobSecretFile(secret_path, deadline);
    if (!again.ok()) return client.status();
    *secret = *again;
  }
}

// What tells apart the secret files of torchrun jobs that share a home
// directory and a store address: the run id and the restart (a restarted
// group meets afresh), and this host's name where the address is a
// loopback one (single-node jobs on several hosts, each at 127.0.0.1).
std::string TorchrunKeyParts(const std::map<std::string, std::string>& env,
                             const net::HostPort& store) {
  std::string key = "-" + Get(env, "TORCHELASTIC_RUN_ID");
  if (env.count("TORCHELASTIC_RESTART_COUNT")) {
    key += "-r" + Get(env, "TORCHELASTIC_RESTART_COUNT");
  }
  if (store.host == "localhost" || store.host == "::1" || store.host.rfind("127.", 0) == 0) {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    key += std::string("-") + name;
  }
  return key;
}

}  // namespace

bool MpiCarriesRendezvous(const Config& config, const std::map<std::string, std::string>& env,
                          const std::string& layout_source) {
  if (MpiFlavourFromEnv(env).empty() || layout_source == "torchrun") return false;
  if (!SlurmStepFromEnv(env)) return true;
  return config.transport == "mpi" || config.backend.rfind("mpi", 0) == 0;
}

Result<Rendezvous> JoinRendezvous(const Config& config,
                                  const std::map<std::string, std::string>& env,
                                  const RankLayout& l, const Logger& logger) {
  // One deadline for every wait below: MPI's start and broadcast, the
  // secret file, the store's connection.
  const TimePoint deadline = DeadlineAfter(Clock::now(), SecondsToDuration(config.start_timeout_s));
  // (An elastic worker learns its rank from horarun's store, once joined.)
  const std::string me =
      !config.worker_id.empty()
          ? "elastic worker " + config.worker_id
          : "rank " + std::to_string(l.rank) + " of " + std::to_string(l.size) + " (layout from " +
                (l.source == "horarun" ? "HORA_RANK and HORA_SIZE" : l.source) + ")";
  Rendezvous rv;
  rv.store_addr = config.store_addr;
  rv.secret = config.secret;
  std::string via = rv.store_addr.empty() ? "" : "HORA_STORE_ADDR";
  if (rv.store_addr.empty() && env.count("MASTER_ADDR") && env.count("MASTER_PORT")) {
    HORA_ASSIGN_OR_RETURN(rv.store_addr, TorchrunStoreAddr(env));
    via = "MASTER_ADDR:MASTER_PORT+1";
  }
  const std::optional<SlurmStep> slurm = SlurmStepFromEnv(env);
  std::string mpi_unavailable;  // why the MPI bootstrap was not used
  if ((rv.store_addr.empty() || rv.secret.empty()) && MpiCarriesRendezvous(config, env, l.source)) {
    // An MPI launcher (mpirun, or srun with PMI for a job that uses MPI):
    // MPI carries what is missing.
    Result<MpiBootstrap*> mpi = LoadMpiBootstrap(config, env);
    if (mpi.ok()) {
      const bool picked = rv.store_addr.empty();
      HORA_RETURN_IF_ERROR(MpiBootstrapRendezvous(**mpi, config, l, deadline, &rv)
                               .WithContext(me + ": MPI bootstrap"));
      if (picked) via = "MPI (rank 0's address, by MPI_Ibcast)";
      logger.Info("rendezvous at " + rv.store_addr + " (" + via + "), job secret by MPI");
    } else {
      mpi_unavailable = mpi.status().message();
    }
  }
  std::string secret_path;  // the private file that passes the secret
  std::string secret_hint;
  if (rv.mpi == nullptr && slurm) {
    if (rv.store_addr.empty()) {
      HORA_ASSIGN_OR_RETURN(std::string host, FirstSlurmHost(slurm->nodelist));
      HORA_ASSIGN_OR_RETURN(uint16_t port, SlurmStorePort(slurm->job, slurm->step));
      rv.store_addr = WithPort(host, port);
      via = "the first host of the Slurm step, port from SLURM_JOB_ID " + slurm->job +
            " and SLURM_STEP_ID " + slurm->step;
      const std::string node = Get(env, "SLURM_NODEID");
      if (l.rank == 0 && !node.empty() && node != "0") {
        return InvalidArgument(me + ": rank 0 runs on Slurm node " + node +
                               ", not on the step's first host " + host +
                               ", where the other ranks look for its store; set "
                               "HORA_STORE_ADDR=<rank 0's host>:<port>");
      }
    }
    if (rv.secret.empty()) {
      // Named by the store's port too: Sessions of one process that are
      // alive together each have their own store (HORA_STORE_ADDR).
      HORA_ASSIGN_OR_RETURN(net::HostPort hp, net::ParseHostPort(rv.store_addr));
      std::string key = slurm->job + "." + slurm->step + "-" + std::to_string(hp.port);
      // (torchrun's workers in a step: one torchrun a node may each run a
      // job of its own, at the same MASTER_ADDR.)
      if (l.source == "torchrun") key += TorchrunKeyParts(env, hp);
      HORA_ASSIGN_OR_RETURN(secret_path, JobSecretPath(env, key));
      secret_hint = l.source == "torchrun" ? "torchrun" : "srun";
    }
  } else if (rv.mpi == nullptr && rv.secret.empty() && env.count("MASTER_ADDR") &&
             env.count("MASTER_PORT")) {
    // The store's address, not just MASTER_*: Sessions of one process that
    // are alive together each have their own store (HORA_STORE_ADDR).
    HORA_ASSIGN_OR_RETURN(net::HostPort hp, net::ParseHostPort(rv.store_addr));
    HORA_ASSIGN_OR_RETURN(
        secret_path, JobSecretPath(env, "torchrun-" + rv.store_addr + TorchrunKeyParts(env, hp)));
    secret_hint = "torchrun";
  }
  if (rv.store_addr.empty()) {
    return InvalidArgument(
        me +
        ": no rendezvous address. Hora finds one by itself under horarun, mpirun (OpenMPI or "
        "MPICH: rank 0's address travels by MPI), srun (the step's first host, from "
        "SLURM_JOB_ID, SLURM_STEP_ID and SLURM_STEP_NODELIST) and torchrun (MASTER_ADDR, "
        "MASTER_PORT)" +
        (mpi_unavailable.empty() ? std::string() : "; MPI is not usable: " + mpi_unavailable) +
        ". Elsewhere set HORA_STORE_ADDR=host:port (rank 0 serves it) and HORA_SECRET");
  }
  if (rv.secret.empty() && secret_path.empty()) {
    return InvalidArgument(
        me +
        ": HORA_SECRET is not set: every rank needs the same job secret (horarun sets it; "
        "under mpirun MPI carries it, under srun and torchrun a private file in the home "
        "directory; here export HORA_SECRET=<random string>)" +
        (mpi_unavailable.empty() ? std::string() : "; MPI is not usable: " + mpi_unavailable));
  }
  if (!secret_path.empty()) {
    if (l.rank == 0) {
      HORA_ASSIGN_OR_RETURN(rv.secret_file, JobSecretFile::Create(secret_path));
      rv.secret = rv.secret_file->secret();
    } else {
      Result<std::string> secret = ReadJobSecretFile(secret_path, deadline);
      if (!secret.ok()) {
        return secret.status().WithContext(
            me + ": waiting for rank 0's job secret within HORA_START_TIMEOUT_S=" +
            Seconds(config.start_timeout_s) + " (under " + secret_hint +
            ", rank 0 writes it to a private file of the home directory, which every host must "
            "share; otherwise set the same HORA_SECRET on every rank). Is rank 0 running?");
      }
      rv.secret = *secret;
    }
    logger.Info("rendezvous at " + rv.store_addr + " (" + via + "), job secret through " +
                secret_path);
  }
  HORA_ASSIGN_OR_RETURN(net::HostPort hp, net::ParseHostPort(rv.store_addr));
  const bool rank0_serves = !config.worker_id.empty()
                                ? false  // (horarun serves an elastic job's store)
                            : config.store_server.empty() ? l.source != "horarun"
                                                          : config.store_server == "rank0";
  if (rank0_serves && l.rank == 0 && rv.server == nullptr) {
    auto server = TcpStoreServer::Start("", hp.port, rv.secret, logger);
    if (!server.ok()) {
      return server.status().WithContext(me + ": serving the rendezvous store at " + rv.store_addr +
                                         " (" + via + "; another port: HORA_STORE_ADDR=host:port)");
    }
    rv.server = std::move(server).value();
  }
  Result<std::unique_ptr<TcpStoreClient>> client =
      secret_path.empty() || l.rank == 0
          ? TcpStoreClient::Connect(hp, rv.secret, Left(deadline))
          : ConnectWithSecretFile(hp, secret_path, deadline, &rv.secret);
  if (!client.ok()) {
    return client.status().WithContext(me + ": rendezvous store (" + via + ")");
  }
  rv.store = std::move(client).value();
  return rv;
}

}  // namespace hora
