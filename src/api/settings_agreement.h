// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The settings every rank must give alike (AgreedSettings in
// common/config.h), compared when a Session's ranks meet in the store and
// before any transport connects: rank 0 reads each rank's values and every
// rank reads its one verdict. Ranks that differ all fail at once, naming each
// setting and each rank's value, instead of waiting in a collective that can
// never line up (a different algorithm or fusion plan) or for a connection
// that never comes (a different transport).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "common/clock.h"
#include "hora/status.h"
#include "store/store.h"

namespace hora {

using NamedValues = std::vector<std::pair<std::string, std::string>>;

// Compares `mine` (this rank's values) across the `size` ranks meeting under
// store keys `prefix` ("hora/<session id>"), within `timeout`.
Status CompareSettings(Store& store, const std::string& prefix, int rank, int size,
                       const NamedValues& mine, Duration timeout);

// The same comparison over `backend`, for ranks that meet in no store (MPI's
// transport or backend): every rank gathers every rank's values and reaches
// the same verdict.
Status CompareSettingsOver(CollectiveBackend& backend, int rank, int size, const NamedValues& mine);

// What differs among `by_rank` (rank r's values at r), setting by setting
// ("HORA_X is 'a' on rank 1 and 'b' on ranks 0, 2"); empty when they agree.
std::string SettingsDisagreement(const std::vector<NamedValues>& by_rank);

}  // namespace hora
