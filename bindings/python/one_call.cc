// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The one-call forms of hora._core's collectives: a contiguous host tensor
// of a dtype but bool, submitted and waited for here (the GIL released),
// without a handle object for Python to make and wait on (for a small
// tensor those are most of the call). Each returns its "declined" value
// (False or None), the capsule unused, for any other tensor: the caller
// then takes its general path, whose checks say what is wrong, if anything.
#include "one_call.h"

#include <pybind11/stl.h>

#include <cstring>
#include <memory>

#include "dlpack_convert.h"

namespace hora::python {
namespace {

// A one-call form's output, made here: its capsule, or a writeable buffer
// over it (`buffer`: for NumPy, whose from_dlpack arrays are read-only).
py::object Made(const std::shared_ptr<Tensor>& made, bool buffer) {
  if (buffer) return py::cast(OutputBuffer{Handle(), made});
  return ExportView(made->view(), made);
}

// The same for an output the collective made.
py::object Done(const PyHandle& h, bool buffer) {
  if (buffer) return py::cast(h.OutputAsBuffer());
  return h.Output();
}

}  // namespace

// In place, and waited for here (the GIL released): hora.torch's
// allreduce_ of a host tensor, without a handle object for Python to make
// and wait on (for a small tensor those are a good part of the call).
// False, the capsule unused, unless it holds a contiguous host tensor of a
// dtype but bool (TakeHostTensor): the caller takes its general path (the
// checks of the common case cost less here than in Python).
bool AllreduceInPlace(PySession& ps, const std::string& name, const py::object& tensor, int op,
                      double pre, double post, int set) {
  Session& s = ps.Get();
  const Reduction red = MakeReduction(op, pre, post);
  std::optional<Imported> i = TakeHostTensor(tensor);
  if (!i) return false;
  ps.Run(s.AllreduceAsync(name, i->view, i->view, red, set), name, {i->owner});
  return true;
}

// Into a new output from the Session's pool (NewOutput), waited for here:
// hora.torch's allreduce of a host tensor. Returns the output's capsule;
// None, as AllreduceInPlace's false.
py::object AllreduceNew(PySession& ps, const std::string& name, const py::object& tensor, int op,
                        double pre, double post, int set, bool buffer) {
  Session& s = ps.Get();
  const Reduction red = MakeReduction(op, pre, post);
  std::optional<Imported> i = TakeHostTensor(tensor);
  if (!i) return py::none();
  auto made = std::make_shared<Tensor>(s.NewOutput(i->view.dtype(), i->view.shape()));
  ps.Run(s.AllreduceAsync(name, i->view, made->view(), red, set), name, {i->owner, made});
  return Made(made, buffer);
}

// The one-call forms of the collectives whose output Hora makes, as
// AllreduceNew: a contiguous host tensor of a dtype but bool (with a
// dimension, where the collective splits or joins dimension 0), waited for
// here; the output's capsule when done, or None, the capsule unused, for any
// other tensor (the caller's general path says what is wrong, if anything).
py::object AllgatherNew(PySession& ps, const std::string& name, const py::object& tensor, int set,
                        bool buffer) {
  Session& s = ps.Get();
  std::optional<Imported> i = TakeHostTensor(tensor, 1);
  if (!i) return py::none();
  return Done(*ps.RunForOutput(s.AllgatherAsync(name, i->view, set), name, {i->owner}), buffer);
}

// Root's tensor into a new one from the Session's pool on every rank.
py::object BroadcastNew(PySession& ps, const std::string& name, const py::object& tensor, int root,
                        int set) {
  Session& s = ps.Get();
  std::optional<Imported> i = TakeHostTensor(tensor);
  if (!i) return py::none();
  auto made = std::make_shared<Tensor>(s.NewOutput(i->view.dtype(), i->view.shape()));
  if (s.rank() == root && made->num_bytes() > 0) {
    std::memcpy(made->data(), i->view.data(), made->num_bytes());
  }
  ps.Run(s.BroadcastAsync(name, made->view(), root, set), name, {i->owner, made});
  return ExportView(made->view(), made);
}

// (output capsule, received splits) or None.
py::object AlltoallNew(PySession& ps, const std::string& name, const py::object& tensor,
                       const std::optional<std::vector<int64_t>>& splits, int set, bool buffer) {
  Session& s = ps.Get();
  std::optional<Imported> i = TakeHostTensor(tensor, 1);
  if (!i) return py::none();
  std::vector<int64_t> sp = splits.value_or(std::vector<int64_t>{});
  std::unique_ptr<PyHandle> h =
      ps.RunForOutput(s.AlltoallAsync(name, i->view, sp, set), name, {i->owner});
  return py::make_tuple(Done(*h, buffer), h->ReceivedSplits());
}

py::object ReducescatterNew(PySession& ps, const std::string& name, const py::object& tensor,
                            int op, double pre, double post, int set, bool buffer) {
  Session& s = ps.Get();
  const Reduction red = MakeReduction(op, pre, post);
  std::optional<Imported> i = TakeHostTensor(tensor, 1);
  if (!i) return py::none();
  return Done(*ps.RunForOutput(s.ReducescatterAsync(name, i->view, red, set), name, {i->owner}),
              buffer);
}

}  // namespace hora::python
