// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// hora._core._DeviceBuffer: memory of a Session's GPU that speaks DLPack as
// a CUDA producer does (__dlpack__, __dlpack_device__ = (kDLCUDA, ordinal)).
// With HORA_DEVICE=host it is host-device memory, so the Python side of GPU
// tensors -- import of kDLCUDA capsules, outputs on the device -- runs in CI
// without a GPU. For tests: frameworks bring their own device memory.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "hora/hora.h"

namespace hora::python {

class DeviceBuffer {
 public:
  // A copy of `host_array` (a CPU tensor with __dlpack__, e.g. a NumPy
  // array) on `session`'s GPU (cuda:0).
  static DeviceBuffer FromHost(Session& session, const pybind11::object& host_array);

  pybind11::capsule Dlpack(const pybind11::object& stream) const;
  pybind11::tuple DlpackDevice() const;

  // The bytes of `tensor` (a GPU tensor with __dlpack__, or a capsule of
  // one), copied back to the host.
  static pybind11::bytes ReadBack(Session& session, const pybind11::object& tensor);

 private:
  std::shared_ptr<Tensor> tensor_;
};

// Adds _DeviceBuffer and Session's helpers for it to module `m`.
void AddDeviceBuffer(pybind11::module_& m);

}  // namespace hora::python
