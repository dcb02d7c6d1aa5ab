// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The physical limit printed beside the sweep: memory bandwidth (one
// thread's memcpy) when every rank shares this host's memory, else the
// bandwidth of one TCP stream from rank 0 to rank 1 over the ranks' route.
#pragma once

#include <string>

#include "hora/hora.h"

namespace hora::bench {

struct Limit {
  std::string kind;  // "memcpy" or "tcp_stream"
  double gbps = 0;   // GB/s (1e9 bytes per second)
  std::string line;  // for the table header
};

// Every rank calls it (the TCP stream needs ranks 0 and 1); the figure is
// rank 0's. `tcp` picks the stream even when every rank is on this host.
Result<Limit> MeasureLimit(Session& session, bool tcp, double timeout_s);

}  // namespace hora::bench
