// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Addresses for hora-bench's peers: where this rank can be reached.
#pragma once

#include <string>

#include "hora/hora.h"

namespace hora::bench {

// The value of environment variable `name`, or "" when unset.
std::string Env(const char* name);

// HORA_TIMEOUT_S (default 30): the bound of every wait of the peers.
double TimeoutSeconds();

// This host's IPv4 address on the route toward `host` (no packet is sent).
Result<std::string> LocalAddressToward(const std::string& host);

// The address other ranks reach this one at: 127.0.0.1 when every rank is on
// this host, else the address toward the rendezvous store (HORA_STORE_ADDR).
Result<std::string> ReachableAddress(const Session& session);

// Sends `text` (at most 255 bytes) from rank `root` to every rank.
Result<std::string> BroadcastText(Session& session, const std::string& text, int root);

}  // namespace hora::bench
