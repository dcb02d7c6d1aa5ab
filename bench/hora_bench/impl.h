// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// One implementation measured by hora-bench: Hora itself, or a peer (MPI's
// own collectives, Gloo, ...). The driver (main.cc) owns the buffers and the
// timing; an implementation only runs the collective.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "args.h"
#include "data.h"
#include "hora/hora.h"

namespace hora::bench {

// The buffers of one size: `in` holds layout.in_count elements, `out`
// layout.out_count (out == in for in-place allreduce and for broadcast).
struct Buffers {
  uint8_t* in = nullptr;
  uint8_t* out = nullptr;
};

class Impl {
 public:
  virtual ~Impl() = default;
  // The `impl` field of the JSON records: "hora", "mpi", "gloo_ring", ...
  virtual std::string name() const = 0;
  // Why this implementation cannot run `args` (a dtype or op it lacks), or "".
  virtual std::string Unsupported(const Args& args) const = 0;
  // Sets up for one size (untimed), e.g. builds an algorithm object.
  virtual Status Prepare(const Args& args, const Layout& layout, const Buffers& buffers) = 0;
  // Before each iteration (untimed): for implementations that only reduce in
  // place, copies the input into the output.
  virtual void BeforeRun() {}
  // One collective (timed).
  virtual Status Run() = 0;
  // Where the result of the last Run lies (layout.out_count elements).
  virtual const uint8_t* Output() const = 0;
};

// Hora through `session` (named `name`: "hora", or "mpi" for a session whose
// backend is the MPI library's collectives).
std::unique_ptr<Impl> MakeSessionImpl(Session& session, std::string name);

// Hora on GPU tensors of `session`'s device (HORA_DEVICE=`device`: "host"
// or "cuda"), named "hora@<device>".
Result<std::unique_ptr<Impl>> MakeDeviceImpl(Session& session, const std::string& device);

// NCCL's own collectives on `session`'s GPU ("nccl@cuda"; --device cuda):
// the communicator is made now, collectively.
Result<std::unique_ptr<Impl>> MakeNcclImpl(Session& session, const std::string& device);

}  // namespace hora::bench
