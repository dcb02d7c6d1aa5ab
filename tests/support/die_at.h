// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The --die-at and --stall-at loops of the multi-process workers: runs
// `allreduce` until the last rank, at iteration `iteration`, SIGKILLs
// itself (or, with `stall`, sleeps 300 s and returns 5). Every other rank
// prints the error its allreduce got and returns 3 when it names that rank,
// 4 when not.
#pragma once

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include "hora/hora.h"

namespace hora::testing {

inline int DieAt(Session& s, int iteration, bool stall, const std::function<Status()>& allreduce) {
  for (int i = 0;; ++i) {
    if (i == iteration && s.rank() == s.size() - 1) {
      std::fprintf(stderr, "rank %d: %s at iteration %d\n", s.rank(),
                   stall ? "stalling for 300 s" : "killing myself with SIGKILL", i);
      std::fflush(stderr);
      if (stall) {
        std::this_thread::sleep_for(std::chrono::seconds(300));
        return 5;
      }
      raise(SIGKILL);
    }
    const Status st = allreduce();
    if (!st.ok()) {
      std::printf("rank %d: allreduce %d failed as expected: %s\n", s.rank(), i,
                  st.ToString().c_str());
      const bool names =
          st.message().find("rank " + std::to_string(s.size() - 1)) != std::string::npos;
      return names ? 3 : 4;
    }
  }
}

}  // namespace hora::testing
