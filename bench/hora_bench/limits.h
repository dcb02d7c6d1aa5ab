// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The physical limit printed beside the sweep: memory bandwidth (one
// thread's memcpy) when every rank shares this host's memory, else the
// bandwidth of a TCP stream while every rank streams to the next at once,
// from a buffer of the sweep's largest size (a ring allreduce's load),
// beside one stream's alone.
#pragma once

#include <string>

#include "hora/hora.h"

namespace hora::bench {

struct Limit {
  std::string kind;  // "memcpy" or "tcp_ring"
  double gbps = 0;   // GB/s (1e9 bytes per second)
  std::string line;  // for the table header
};

// Every rank calls it (the TCP streams need every rank); the figure is
// rank 0's. `tcp` picks the streams even when every rank is on this host;
// `bytes`: the sweep's largest message.
Result<Limit> MeasureLimit(Session& session, bool tcp, size_t bytes, double timeout_s);

}  // namespace hora::bench
