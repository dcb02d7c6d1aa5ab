// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// What a Session owns. Collective entry points live in session.cc (fixed-size
// collectives) and session_shapes.cc (those that exchange shapes first).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "collectives/comm.h"
#include "collectives/hora_backend.h"
#include "collectives/selector.h"
#include "common/config.h"
#include "common/logging.h"
#include "engine/engine.h"
#include "hora/session.h"
#include "launch/rank_layout.h"
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
        comm(*transport, SecondsToDuration(config.timeout_s), config.ring_segment_bytes, 0),
        backend(CreateHoraBackend(comm, sel)),
        engine_comm(*transport, SecondsToDuration(config.timeout_s), config.ring_segment_bytes, 1),
        control_comm(*transport, SecondsToDuration(config.timeout_s), config.ring_segment_bytes, 2),
        engine_backend(CreateHoraBackend(engine_comm, std::move(sel))) {}
  ~Impl() { engine.reset(); }  // stops the engine thread before what it uses goes

  const Config config;
  RankLayout layout;  // local and cross ranks (set once by Session::Create)
  Logger logger;
  std::unique_ptr<TcpStoreServer> store_server;  // rank 0 under a foreign launcher
  std::shared_ptr<Store> store;
  std::unique_ptr<Transport> transport;
  Comm comm;
  // Hora's algorithms over `comm`, or MPI's collectives (HORA_BACKEND=mpi).
  std::unique_ptr<CollectiveBackend> backend;

  // The engine (async, named collectives): its data and control messages
  // use tag contexts of their own, so that it and the direct calls above
  // can run at once. Started by the first async call on each rank.
  Comm engine_comm;
  Comm control_comm;
  std::unique_ptr<CollectiveBackend> engine_backend;
  std::mutex engine_mu;
  std::unique_ptr<Engine> engine;
  uint64_t unnamed[kOpTypeCount] = {};  // per OpType: generated names
  uint64_t unnamed_groups = 0;
  std::shared_ptr<Timeline> timeline;  // guarded by engine_mu
  Engine& GetEngine() {
    std::lock_guard<std::mutex> lock(engine_mu);
    if (!engine) {
      engine = std::make_unique<Engine>(config, control_comm, *engine_backend, logger);
      engine->SetTimeline(timeline);
    }
    return *engine;
  }

  std::string Where(const char* op) const {
    return "rank " + std::to_string(comm.rank()) + ": " + op;
  }
};

// The timeline file of `rank` for HORA_TIMELINE=`path`: "{rank}" replaced by
// the rank, or, without it, `path` on rank 0 and none ("") elsewhere.
std::string TimelinePathFor(const std::string& path, int rank);

// Rejects reductions that are not defined for `dtype` (bool: no average, no
// scale factors). The message starts with "rank R: <op>".
Status CheckReduction(const Session::Impl& impl, const char* op, DataType dtype,
                      const Reduction& reduction);

// Engine submissions (session_async.cc). The name of an engine call: `name`,
// or for an empty one "<op>.noname.<N>" (the same on every rank for its N-th
// such call, and then not cacheable).
std::string NameOrGenerated(Session::Impl& impl, const std::string& name, OpType op,
                            bool* cacheable);
// "rank R: <op> '<name>'", the start of every error about an engine call.
std::string Where(const Session::Impl& impl, OpType op, const std::string& name);
// Submits `count` members named "<group>.<i>" as one group; `prepare` fills
// member i. When one member is bad, every handle fails with its error.
std::vector<Handle> SubmitGroup(
    Session::Impl& impl, const std::string& kind, const std::string& group, size_t count,
    const std::function<Status(size_t, const std::string&, bool, Submission*)>& prepare);

// The rows of dimension 0 that `input` sends to each of `n` ranks: `splits`
// (checked: n of them, none negative, adding up to dimension 0), or an even
// split when `splits` is empty. Errors start with `where`.
Status AlltoallRows(const std::string& where, const TensorView& input,
                    std::span<const int64_t> splits, size_t n, std::vector<int64_t>* rows);

// `tensor.Validate()`, with "rank R: <op> <which>: " before any error.
inline Status CheckTensor(const Session::Impl& impl, const char* op, const char* which,
                          const TensorView& tensor) {
  Status st = tensor.Validate();
  if (st.ok()) return st;
  return st.WithContext(impl.Where(op) + " " + which);
}

}  // namespace hora
