// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// hora._core._DeviceBuffer: memory of a Session's GPU that speaks DLPack as
// a CUDA producer does (__dlpack__, __dlpack_device__ = (kDLCUDA, ordinal)).
// With HORA_DEVICE=host it is host-device memory, so the Python side of GPU
// tensors -- import of kDLCUDA capsules, outputs on the device -- runs in CI
// without a GPU. For tests: frameworks bring their own device memory.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "dlpack_convert.h"
#include "hora/hora.h"

namespace hora::python {

class DeviceBuffer {
 public:
  // A copy of `host_array` (a CPU tensor with __dlpack__, e.g. a NumPy
  // array) on GPU `device_index` (None: the rank's GPU, the one its Session
  // opened, else cuda:0). With `later` (a host array of the same size; host
  // device only), a producer of its own then overwrites it with `later` on
  // a stream of its own, `delay_s` later, as a framework's kernel still
  // running would.
  static DeviceBuffer FromHost(Session& session, const pybind11::object& host_array,
                               const pybind11::object& later, double delay_s,
                               const pybind11::object& device_index);

  // A capsule over the memory. Given a stream, makes it wait for the
  // producer's work first (DLPack's protocol).
  pybind11::capsule Dlpack(const pybind11::object& stream) const;
  pybind11::tuple DlpackDevice() const;

  // The bytes of `tensor` (a GPU tensor with __dlpack__, or a capsule of
  // one), copied back to the host; with `after` (a stream), once the work
  // queued on it so far is done.
  static pybind11::bytes ReadBack(Session& session, const pybind11::object& tensor,
                                  std::optional<uint64_t> after);

  // Holds back (or lets go) the copies from host to device memory that the
  // session's host device queues meanwhile (gpu::HostDevice::HoldCopies);
  // an error off the host device.
  static void HoldCopiesToDevice(Session& session, bool hold);

 private:
  struct Producer;
  std::shared_ptr<Tensor> tensor_;
  std::shared_ptr<Producer> producer_;
};

// GPU `device` (an int), or with None the rank's: the one `session`
// opened, else 0.
int RankOrdinal(Session& session, const pybind11::object& device);

// The stream on which `session` reads CUDA tensors (dlpack_convert.h).
StreamFor StreamsOf(Session& session);

// Adds _DeviceBuffer to module `m`.
void AddDeviceBuffer(pybind11::module_& m);

}  // namespace hora::python
