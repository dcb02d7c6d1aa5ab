// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Session::ElasticHostUpdates: the counters horarun's host discovery adds to
// (launch/elastic_place.h), read from the job's store.
#include "api/session_impl.h"
#include "launch/elastic_place.h"

namespace hora {

Result<Session::HostUpdates> Session::ElasticHostUpdates() {
  const Config& c = impl_->config;
  HostUpdates u;
  if (c.worker_id.empty() || c.job_id.empty() || impl_->store == nullptr) return u;
  // (Adding 0 reads a counter without waiting; one never added reads 0.)
  Result<int64_t> added = impl_->store->Add(ElasticHostsAddedKey(c.job_id), 0);
  if (!added.ok()) return added.status().WithContext(impl_->Where("reading host updates"));
  Result<int64_t> removed = impl_->store->Add(ElasticHostsRemovedKey(c.job_id), 0);
  if (!removed.ok()) return removed.status().WithContext(impl_->Where("reading host updates"));
  u.added = *added;
  u.removed = *removed;
  u.added_known = impl_->hosts_known.first;
  u.removed_known = impl_->hosts_known.second;
  return u;
}

}  // namespace hora
