// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// DLPack in and out of the Python module (design.md §3): tensors cross into
// C++ as DLPack capsules, zero copy, so the core never compiles against a
// framework and one build serves every PyTorch version and NumPy alike.
//
// In: a capsule named "dltensor" (torch.utils.dlpack.to_dlpack(t),
// ndarray.__dlpack__()) is consumed, as the DLPack protocol says: it is
// renamed "used_dltensor" and its DLManagedTensor is then ours, released by
// the returned Keepalive (its deleter runs with the GIL held, since NumPy's
// deleter touches Python objects).
// Out: a Tensor that Hora allocated, kept alive by a Handle, becomes a new
// "dltensor" capsule whose deleter drops that Handle.
// Devices: kDLCPU and kDLCUDAHost are host memory; kDLCUDA is a GPU tensor
// (cuda:<device_id>); others are refused.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "hora/hora.h"

namespace hora::python {

using Keepalive = std::shared_ptr<void>;

struct Imported {
  TensorView view;
  Keepalive owner;  // keeps the producer's memory alive
};

// Consumes `capsule`. `what` names the argument in errors ("allreduce
// 'w' input"). Throws InvalidArgumentError (non-contiguous, unsupported
// dtype or device, a used capsule) naming it.
Imported ImportCapsule(const pybind11::object& capsule, const std::string& what);

// A new capsule over `handle`'s output tensor (which must exist), on its
// device (kDLCUDA for a GPU tensor's output).
pybind11::capsule ExportOutput(const Handle& handle);
// A new capsule over `view`, which `keep` keeps alive.
pybind11::capsule ExportView(const TensorView& view, std::shared_ptr<const void> keep);

}  // namespace hora::python
