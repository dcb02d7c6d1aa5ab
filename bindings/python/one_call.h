// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The one-call forms of hora._core's collectives (one_call.cc).
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "py_session.h"

namespace hora::python {

// In place: True when done (raises its error); False, the capsule unused.
bool AllreduceInPlace(PySession& ps, const std::string& name, const py::object& tensor, int op,
                      double pre, double post, int set);
// Into a new output from the Session's pool: its capsule when done (with
// `buffer`, a writeable buffer over it, for NumPy); None, the capsule
// unused.
py::object AllreduceNew(PySession& ps, const std::string& name, const py::object& tensor, int op,
                        double pre, double post, int set, bool buffer);
py::object AllgatherNew(PySession& ps, const std::string& name, const py::object& tensor, int set,
                        bool buffer);
py::object BroadcastNew(PySession& ps, const std::string& name, const py::object& tensor, int root,
                        int set);
// (output capsule or buffer, received splits), or None.
py::object AlltoallNew(PySession& ps, const std::string& name, const py::object& tensor,
                       const std::optional<std::vector<int64_t>>& splits, int set, bool buffer);
py::object ReducescatterNew(PySession& ps, const std::string& name, const py::object& tensor,
                            int op, double pre, double post, int set, bool buffer);

}  // namespace hora::python
