// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// What a Session owns. Collective entry points live in session.cc (fixed-size
// collectives) and session_shapes.cc (those that exchange shapes first).
#pragma once

#include <memory>

#include "backends/backend.h"
#include "collectives/comm.h"
#include "collectives/hora_backend.h"
#include "collectives/selector.h"
#include "common/config.h"
#include "common/logging.h"
#include "hora/session.h"
#include "store/store.h"
#include "store/tcp_store_server.h"
#include "transport/transport.h"

namespace hora {

struct Session::Impl {
  Impl(Config c, std::shared_ptr<Store> s, std::unique_ptr<Transport> t, Selector sel)
      : config(std::move(c)),
        logger(config.log_level, t->rank()),
        store(std::move(s)),
        transport(std::move(t)),
        comm(*transport, SecondsToDuration(config.timeout_s), config.ring_segment_bytes),
        backend(CreateHoraBackend(comm, std::move(sel))) {}

  const Config config;
  Logger logger;
  std::unique_ptr<TcpStoreServer> store_server;  // rank 0 under a foreign launcher
  std::shared_ptr<Store> store;
  std::unique_ptr<Transport> transport;
  Comm comm;
  // Hora's algorithms over `comm`, or MPI's collectives (HORA_BACKEND=mpi).
  std::unique_ptr<CollectiveBackend> backend;

  std::string Where(const char* op) const {
    return "rank " + std::to_string(comm.rank()) + ": " + op;
  }
};

// Rejects reductions that are not defined for `dtype` (bool: no average, no
// scale factors). The message starts with "rank R: <op>".
Status CheckReduction(const Session::Impl& impl, const char* op, DataType dtype,
                      const Reduction& reduction);

// `tensor.Validate()`, with "rank R: <op> <which>: " before any error.
inline Status CheckTensor(const Session::Impl& impl, const char* op, const char* which,
                          const TensorView& tensor) {
  Status st = tensor.Validate();
  if (st.ok()) return st;
  return st.WithContext(impl.Where(op) + " " + which);
}

}  // namespace hora
