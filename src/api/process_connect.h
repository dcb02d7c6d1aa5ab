// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Connects a Session whose ranks are processes: finds the rank layout in the
// launcher's environment, reaches the rendezvous store (horarun's, or one
// that rank 0 serves under other launchers: see rendezvous.h for how each
// launcher's ranks find it and the job secret), and builds the transport
// (HORA_TRANSPORT, or shared memory when every rank is on this host and TCP
// otherwise).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "api/key_recording_store.h"
#include "common/config.h"
#include "common/environment.h"
#include "common/logging.h"
#include "launch/rank_layout.h"
#include "store/store.h"
#include "transport/transport.h"

namespace hora {

class TcpStoreServer;
class JobSecretFile;
class MpiBootstrap;

struct ProcessWiring {
  RankLayout layout;
  std::unique_ptr<TcpStoreServer> server;  // rank 0 under a foreign launcher
  std::shared_ptr<Store> store;
  // The same store, remembering the rendezvous keys this rank set (deleted
  // once every rank has connected: Session::Create).
  std::shared_ptr<KeyRecordingStore> rendezvous_keys;
  std::unique_ptr<Transport> transport;
  // Rank 0's secret file (srun, torchrun), removed once the transport is up.
  std::unique_ptr<JobSecretFile> secret_file;
  // Set when the rendezvous went through MPI (MPI is then initialised).
  MpiBootstrap* mpi = nullptr;
  // An elastic worker: horarun's counts of host updates (hosts added,
  // removed) when it arrived, which the world it was placed in reflects.
  int64_t hosts_added_known = 0, hosts_removed_known = 0;
  int64_t elastic_generation = 0;  // an elastic worker's world (0: not elastic)
  ~ProcessWiring();
  ProcessWiring();
  ProcessWiring(ProcessWiring&&) noexcept;
};

// `env` is the whole process environment (launcher variables included).
Result<ProcessWiring> ConnectProcess(const Config& config,
                                     const std::map<std::string, std::string>& env,
                                     const Logger& logger);

}  // namespace hora
