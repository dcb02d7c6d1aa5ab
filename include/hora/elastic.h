// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Elastic training from C++: what hvd.elastic.run and its states do for
// Python (docs/guide/elastic.md), for a trainer of one's own. Under
// horarun's elastic mode (--min-np/--max-np), a worker that is lost leaves
// the job and the others go on from their last commit, in a new world,
// without restarting.
//
//   struct MyState : hora::ElasticState {
//     Status Save() override { saved = weights; return Status::Ok(); }
//     Status Restore() override { weights = saved; return Status::Ok(); }
//     Status Sync(Session& s) override { return s.Broadcast(view_of(weights), 0); }
//   };
//   hora::RunElastic({}, state, [&](Session& s, ElasticState& st) -> Status {
//     for (; step < steps; ++step) { ...; HORA_RETURN_IF_ERROR(st.Commit()); }
//     return Status::Ok();
//   });
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "hora/session.h"
#include "hora/status.h"

namespace hora {

// The state training must not lose, kept by the trainer: Save keeps a copy
// (in memory), Restore goes back to it, Sync makes every rank's state rank
// 0's (collectives on `session`), Reset runs after each new world (e.g. to
// rescale the learning rate by its size).
class ElasticState {
 public:
  virtual ~ElasticState() = default;
  virtual Status Save() = 0;
  virtual Status Restore() = 0;
  virtual Status Sync(Session& session) = 0;
  virtual void Reset(Session& session) { (void)session; }
  // A commit: Save, then, for a worker of horarun's elastic mode, a look
  // for hosts its discovery script added or removed since this world was
  // formed: rank 0's view, given to every rank (a collective: every rank
  // commits at the same step). When there were, it returns kAborted
  // ("hosts updated"), which RunElastic takes as a reset without a
  // restore: the state was just saved, and the new world takes in the new
  // workers (Python's HostsUpdatedInterrupt).
  Status Commit(Session& session);
  // Save alone (no look for host updates).
  Status Commit() { return Save(); }

 private:
  friend Status RunElastic(const SessionOptions&, ElasticState&,
                           const std::function<Status(Session&, ElasticState&)>&,
                           std::unique_ptr<Session>*);
  bool hosts_updated_ = false;  // the last Commit(session) said so
  int64_t seen_added_ = 0, seen_removed_ = 0;
};

// Makes a Session from `options` and runs train(session, state), after a
// Sync, until it returns. When it fails because the job's world broke (a
// peer lost or shut down: kUnavailable, kAborted, kTimeout), every rank
// restores its last commit, the Session is made again (horarun's elastic
// mode places the survivors in a new world: ranks may change), Reset is
// called (on the restored state), the state is synced from the new rank 0,
// and train runs again. A
// failure during Sync counts as one in train. Returned as they are: train's
// success and its other errors (a mismatch is a bug a new world would
// repeat), and a Session that cannot be made (after 5 tries for a world
// that lost a member before it connected), such as the launcher's end of
// the job. `last`, when given, receives the last Session where train's
// result is returned (not where a world cannot be made or Restore fails).
Status RunElastic(const SessionOptions& options, ElasticState& state,
                  const std::function<Status(Session&, ElasticState&)>& train,
                  std::unique_ptr<Session>* last = nullptr);

}  // namespace hora
