// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "hora/elastic.h"

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
    HORA_RETURN_IF_ERROR(state.Restore());
    session.reset();  // (this world's Session ends before the next is made)
    HORA_ASSIGN_OR_RETURN(session, NextWorld(options));
    state.Reset(*session);
  }
  if (last != nullptr) *last = std::move(session);
  return result;
}

}  // namespace hora
