// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The seam between Hora and NCCL (docs/dev/gpu.md, "NCCL"): the few calls Hora
// makes of it, in Hora's types. Two sides:
//  - the NCCL library (nccl_library.cc), dlopened at run time, so that a
//    build with NCCL's headers still runs where the library is missing;
//    compiled only when those headers are found (else nccl_absent.cc);
//  - HostNccl (host_nccl.h), NCCL's semantics on the host device
//    (src/doubles/) for ranks that are threads of one process or processes
//    of one host, so that the code above this seam runs in CI.
//
// Semantics, as NCCL's: a communicator is made by every rank from one id
// (UniqueId on one rank, shared by the caller); collectives on it are
// queued on a stream, in the same order on every rank, and matched by that
// order. `count`s are elements, `bytes` bytes. Errors name the call and
// NCCL's reason.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/clock.h"
#include "gpu/device.h"
#include "hora/status.h"
#include "hora/types.h"

namespace hora {

struct NcclId {
  std::array<uint8_t, 128> bytes{};  // ncclUniqueId
};

class NcclComm {
 public:
  virtual ~NcclComm() = default;
  // `op`: sum, product, min or max (NcclTakes).
  virtual Status AllReduce(const void* in, void* out, size_t count, DataType dtype, ReduceOp op,
                           gpu::Stream s) = 0;
  virtual Status Broadcast(void* data, size_t bytes, int root, gpu::Stream s) = 0;
  // `bytes` from each rank, to every rank's `out` in rank order.
  virtual Status AllGather(const void* in, void* out, size_t bytes, gpu::Stream s) = 0;
  // Every rank's `in` (`count` elements for each rank, in rank order)
  // reduced; rank r's part to its `out`.
  virtual Status ReduceScatter(const void* in, void* out, size_t count, DataType dtype, ReduceOp op,
                               gpu::Stream s) = 0;
  // Every rank's `in` reduced to `root`'s `out` (the others' is ignored).
  virtual Status Reduce(const void* in, void* out, size_t count, DataType dtype, ReduceOp op,
                        int root, gpu::Stream s) = 0;
  // Point to point, matched in order per pair of ranks; within a group, in
  // any order across peers.
  virtual Status Send(const void* in, size_t bytes, int peer, gpu::Stream s) = 0;
  virtual Status Recv(void* out, size_t bytes, int peer, gpu::Stream s) = 0;
  // The calls between these go as one (ncclGroupStart/End): sends and
  // receives, or several collectives, that would wait for each other one by
  // one. GroupEnd is due after every GroupStart that succeeded, whatever
  // failed between them.
  virtual Status GroupStart() = 0;
  virtual Status GroupEnd() = 0;
  // Whether the communicator failed since (NCCL's asynchronous errors:
  // a lost peer, a network error); never blocks.
  virtual Status AsyncError() = 0;
  // Ends the communicator's work at once, queued kernels included (after a
  // timeout or a lost peer); it is unusable after.
  virtual void Abort() = 0;
};

class NcclLibrary {
 public:
  virtual ~NcclLibrary() = default;
  // "NCCL 2.28.9", "host NCCL (tests)".
  virtual std::string version() const = 0;
  virtual Result<NcclId> UniqueId() = 0;
  // Collective: rank `rank` of `size`, on the GPU of `device`, from the id
  // every rank was given; bounded by `timeout` (a peer that never comes).
  virtual Result<std::unique_ptr<NcclComm>> InitRank(const NcclId& id, int size, int rank,
                                                     gpu::Device& device, Duration timeout) = 0;
};

// Whether NCCL reduces `dtype` with `op` as Hora's kernels do (types.h).
// Not: 16-bit integers and bool (NCCL has no such types); float min and max
// (until a GPU shows NCCL keeps types.h's NaN and signed-zero rules); Adasum
// and average (average is a sum here, finalized by Hora).
bool NcclTakes(DataType dtype, ReduceOp op);

// The NCCL library at `path` ("" : libnccl.so.2 wherever the loader finds
// it), loaded now; an error naming what was tried when it cannot be.
Result<std::unique_ptr<NcclLibrary>> OpenNcclLibrary(const std::string& path);

// Which NCCL a device backend loads (HORA_NCCL_LIBRARY), as the composition
// root chose (backends/device_choice.h): the library, or the host device's
// double.
struct NcclSource {
  // The double runs on the host device only (and the library never does).
  bool on_host_device = false;
  std::function<Result<std::unique_ptr<NcclLibrary>>()> open;
};

}  // namespace hora
