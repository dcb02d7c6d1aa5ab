// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// DLPack in and out of the Python module (docs/dev/design.md §3): tensors cross into
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

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "hora/hora.h"

namespace hora::python {

using Keepalive = std::shared_ptr<void>;

struct Imported {
  TensorView view;
  Keepalive owner;  // keeps the producer's memory alive
};

// The stream (its native handle) on which Hora reads tensors of CUDA device
// `device_id`: a producer asked for a tensor on it makes it wait for the
// tensor's work (DLPack's stream argument). None where there is no device
// (the submission then says why).
using StreamFor = std::function<std::optional<uintptr_t>(int device_id)>;

// Names an argument in errors ("allreduce 'w' input"): text, or an op, a
// tensor's name and which argument, put together only when an error is
// raised (a small collective's call is a few microseconds; the string would
// be a few per cent of it). Holds references: for the call it is passed to.
class ArgName {
 public:
  ArgName(const char* text) : text_(text) {}                 // NOLINT(runtime/explicit)
  ArgName(const std::string& text) : text_(text.c_str()) {}  // NOLINT(runtime/explicit)
  ArgName(const char* op, const std::string& name, const char* which)
      : text_(op), name_(&name), which_(which) {}
  std::string str() const {
    if (name_ == nullptr) return text_;
    return std::string(text_) + " '" + *name_ + "' " + which_;
  }

 private:
  const char* text_;
  const std::string* name_ = nullptr;
  const char* which_ = nullptr;
};

// Consumes `capsule`, or the capsule of an object with __dlpack__ (asked
// with `stream_for`'s stream when its __dlpack_device__ is CUDA, and
// `stream_for` is set). `what` names the argument in errors ("allreduce
// 'w' input"). Throws InvalidArgumentError (non-contiguous, unsupported
// dtype or device, a used capsule) naming it.
Imported ImportCapsule(const pybind11::object& capsule, const ArgName& what,
                       const StreamFor& stream_for = nullptr);

// The tensor of `capsule`, consumed, if it is a contiguous host tensor of a
// dtype but bool, of `min_dims` dimensions or more: the one-call
// collectives (allreduce_inplace, allreduce_new, allgather_new...) take
// those. Else nullopt, the capsule left unused: the caller takes the general
// path, whose checks say what is wrong, if anything.
std::optional<Imported> TakeHostTensor(const pybind11::object& capsule, int min_dims = 0);

// `capsule`'s tensor, of 16-bit integers, as bfloat16 in a new capsule
// (`capsule` is used up): NumPy cannot export ml_dtypes' bfloat16 arrays,
// so hora.numpy exports their bits as uint16 and says what they are here.
// Throws InvalidArgumentError for a used capsule or other elements.
pybind11::capsule AsBfloat16(const pybind11::object& capsule);

// A new capsule over `handle`'s output tensor (which must exist), on its
// device (kDLCUDA for a GPU tensor's output).
pybind11::capsule ExportOutput(const Handle& handle);
// A new capsule over `view`, which `keep` keeps alive.
pybind11::capsule ExportView(const TensorView& view, std::shared_ptr<const void> keep);

}  // namespace hora::python
