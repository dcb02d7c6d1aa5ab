// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "errors.h"

namespace hora::python {
namespace py = pybind11;
namespace {

// The exception types, owned by the module object (interpreter lifetime).
struct Types {
  PyObject* base = nullptr;
  PyObject* by_code[8] = {};
};

Types& ErrorTypes() {
  static Types types;  // set once at import; read-only afterwards
  return types;
}

PyObject* NewType(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("hora._core.") + name;
  PyObject* t = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (t == nullptr) throw py::error_already_set();
  m.add_object(name, py::reinterpret_borrow<py::object>(t));
  return t;
}

}  // namespace

void RegisterErrors(py::module_& m) {
  Types& t = ErrorTypes();
  t.base = NewType(m, "HoraError", PyExc_RuntimeError,
                   "Base of every error Hora raises. The message names the rank, the operation, "
                   "the tensor and the values involved.");
  struct Sub {
    StatusCode code;
    const char* name;
    PyObject* extra_base;
    const char* doc;
  };
  const Sub subs[] = {
      {StatusCode::kInvalidArgument, "InvalidArgumentError", PyExc_ValueError,
       "The call's arguments cannot be used (dtype, device, layout, sizes)."},
      {StatusCode::kTimeout, "HoraTimeoutError", PyExc_TimeoutError,
       "A bounded wait expired (HORA_TIMEOUT_S, a stall, or wait(timeout))."},
      {StatusCode::kMismatch, "MismatchError", nullptr,
       "Ranks disagree about a collective's parameters; the message names each rank's."},
      {StatusCode::kAborted, "AbortedError", nullptr,
       "The operation was cancelled: shutdown, or a failure elsewhere in the job."},
      {StatusCode::kUnavailable, "UnavailableError", nullptr,
       "A peer or service could not be reached (a lost rank is named)."},
      {StatusCode::kInternal, "InternalError", nullptr, "A bug in Hora."},
      {StatusCode::kUnimplemented, "UnimplementedError", PyExc_NotImplementedError,
       "A combination this build does not support."},
  };
  for (const Sub& s : subs) {
    PyObject* bases =
        s.extra_base ? PyTuple_Pack(2, t.base, s.extra_base) : PyTuple_Pack(1, t.base);
    if (bases == nullptr) throw py::error_already_set();
    t.by_code[static_cast<int>(s.code)] = NewType(m, s.name, bases, s.doc);
    Py_DECREF(bases);
  }
}

void ThrowIfError(const Status& st) {
  if (st.ok()) return;
  const Types& t = ErrorTypes();
  PyObject* type = t.by_code[static_cast<int>(st.code())];
  PyErr_SetString(type ? type : t.base, st.message().c_str());
  throw py::error_already_set();
}

void ThrowInvalid(const std::string& message) {
  ThrowIfError(InvalidArgument(message));
  throw std::logic_error("unreachable");
}

}  // namespace hora::python
