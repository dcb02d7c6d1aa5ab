// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A CollectiveBackend whose every collective fails as "not used": tests
// that need one or two (the verdict's allreduce, a chunk's broadcast)
// override those, and learn at once if the code calls another.
#pragma once

#include <span>

#include "backends/backend.h"

namespace hora::testing {

class StubBackend : public CollectiveBackend {
 public:
  const char* name() const override { return "stub"; }
  Status Allreduce(const AllreduceArgs&) override { return Unused(); }
  Status Allgatherv(const void*, void*, std::span<const size_t>) override { return Unused(); }
  Status Broadcast(void*, size_t, int) override { return Unused(); }
  Status Reducescatter(const void*, void*, std::span<const size_t>, DataType,
                       const Reduction&) override {
    return Unused();
  }
  Status Alltoallv(const void*, std::span<const size_t>, void*, std::span<const size_t>) override {
    return Unused();
  }
  Status Barrier() override { return Unused(); }

 protected:
  static Status Unused() { return InternalError("a collective this test does not expect"); }
};

}  // namespace hora::testing
