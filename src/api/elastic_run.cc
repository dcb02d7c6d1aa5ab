// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "hora/elastic.h"

#include <algorithm>
#include <utility>

namespace hora {
namespace {

constexpr int kSessionAttempts = 5;

// Whether `st` says the job's world broke, which a new world mends.
bool WorldBroke(const Status& st) {
  return st.code() == StatusCode::kUnavailable || st.code() == StatusCode::kAborted ||
         st.code() == StatusCode::kTimeout;
}

// A Session of the next world; a world that lost a member before it
// connected (kUnavailable, kTimeout) is tried again.
Result<std::unique_ptr<Session>> NextWorld(const SessionOptions& options) {
  Status last;
  for (int attempt = 0; attempt < kSessionAttempts; ++attempt) {
    Result<std::unique_ptr<Session>> s = Session::Create(options);
    if (s.ok()) return s;
    last = s.status();
    if (last.code() != StatusCode::kUnavailable && last.code() != StatusCode::kTimeout) break;
  }
  return last;
}

}  // namespace

Status ElasticState::Commit(Session& session) {
  hosts_updated_ = false;
  HORA_RETURN_IF_ERROR(Save());
  // Rank 0's counts of updates not yet seen (0, 0 elsewhere and when none),
  // given to every rank, so that all reset or none does.
  int64_t fresh[2] = {0, 0};
  if (session.rank() == 0) {
    HORA_ASSIGN_OR_RETURN(const Session::HostUpdates u, session.ElasticHostUpdates());
    seen_added_ = std::max(seen_added_, u.added_known);  // (this world has those)
    seen_removed_ = std::max(seen_removed_, u.removed_known);
    fresh[0] = u.added - seen_added_;
    fresh[1] = u.removed - seen_removed_;
    seen_added_ = u.added;
    seen_removed_ = u.removed;
  }
  HORA_RETURN_IF_ERROR(session.Broadcast(TensorView(fresh, DataType::kInt64, {2}), 0));
  if (fresh[0] <= 0 && fresh[1] <= 0) return Status::Ok();
  hosts_updated_ = true;
  return AbortedError("hosts updated: " + std::to_string(fresh[0]) + " time(s) added, " +
                      std::to_string(fresh[1]) + " removed, since this world was formed");
}

Status RunElastic(const SessionOptions& options, ElasticState& state,
                  const std::function<Status(Session&, ElasticState&)>& train,
                  std::unique_ptr<Session>* last) {
  HORA_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, NextWorld(options));
  Status result;
  for (;;) {
    Status st = state.Sync(*session);
    if (st.ok()) st = train(*session, state);
    if (!WorldBroke(st)) {
      result = st;
      break;
    }
    // (Hosts updated at a commit: the state is the one just saved.)
    if (!std::exchange(state.hosts_updated_, false)) HORA_RETURN_IF_ERROR(state.Restore());
    session.reset();  // (this world's Session ends before the next is made)
    HORA_ASSIGN_OR_RETURN(session, NextWorld(options));
    state.Reset(*session);
  }
  if (last != nullptr) *last = std::move(session);
  return result;
}

}  // namespace hora
