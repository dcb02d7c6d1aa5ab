// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Session::ReportFailure: a rank's own failure, written to the job's store
// for horarun (launch/failure_report.h); and ReportSilentPeer.
#include "api/session_impl.h"
#include "launch/elastic_place.h"
#include "launch/failure_report.h"

namespace hora {

namespace {

// Whether this Session saw a peer go: its transport lost one, or an engine
// stopped because another rank shut its Session down.
bool PeerWent(Session::Impl& impl) {
  if (impl.transport != nullptr && !impl.transport->LostPeer().ok()) return true;
  MutexLock lock(impl.engine_mu);
  for (const auto& [id, set] : impl.sets) {
    if (set->engine && set->engine->StoppedByPeer()) return true;
  }
  return false;
}

}  // namespace

void Session::ReportFailure(const std::string& what, bool caused_by_peer) {
  const Config& c = impl_->config;
  if (c.job_id.empty() || impl_->store == nullptr || impl_->fork_witness.InChild()) return;
  // (An error of a peer's kind, a device's out-of-memory say, is this
  // rank's own unless a peer did go.)
  FailureReport report{"rank " + std::to_string(rank()), what, caused_by_peer && PeerWent(*impl_)};
  if (!c.worker_id.empty()) report.who = "worker " + c.worker_id + " (" + report.who + ")";
  const Result<int64_t> n = impl_->store->Add(FailureCountKey(c.job_id), 1);
  if (!n.ok()) return;  // (horarun gone: nobody to tell)
  const std::string value = FormatFailure(report);
  (void)impl_->store->Set(FailureKey(c.job_id, *n), Bytes(value.begin(), value.end()));
}

void ReportSilentPeer(Session::Impl& impl) {
  const Config& c = impl.config;
  if (c.worker_id.empty() || c.job_id.empty() || impl.elastic_generation <= 0 ||
      impl.store == nullptr || impl.transport == nullptr) {
    return;
  }
  const int peer = impl.transport->SilentPeer();
  if (peer < 0) return;
  const std::string why = "rank " + std::to_string(impl.comm.rank()) + " (worker " + c.worker_id +
                          "): " + impl.transport->LostPeer().message();
  // (Best effort: horarun gone, or the store, is nobody to tell.)
  (void)impl.store->Set(ElasticSilentKey(c.job_id, impl.elastic_generation, peer),
                        Bytes(why.begin(), why.end()));
}

}  // namespace hora
