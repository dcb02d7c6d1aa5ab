// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "errors.h"

#include <vector>

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
  // Named as users import them (hora.InvalidArgumentError), not by the
  // extension module that creates them.
  const std::string qualified = std::string("hora.") + name;
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
  // Horovod's type for a collective that failed (a mismatch, a lost peer, a
  // shutdown): what Horovod code catches, elastic loops included. Errors in
  // the call's own arguments stay ValueErrors, as in Horovod.
  PyObject* horovod_internal =
      NewType(m, "HorovodInternalError", PyExc_RuntimeError,
              "Horovod's name for a collective that failed across the job (mismatch, lost "
              "peer, timeout, shutdown); Hora's errors of those kinds are subclasses.");
  struct Sub {
    StatusCode code;
    const char* name;
    PyObject* extra_base;
    bool horovod_internal;
    const char* doc;
  };
  const Sub subs[] = {
      {StatusCode::kInvalidArgument, "InvalidArgumentError", PyExc_ValueError, false,
       "The call's arguments cannot be used (dtype, device, layout, sizes)."},
      {StatusCode::kTimeout, "HoraTimeoutError", PyExc_TimeoutError, true,
       "A bounded wait expired (HORA_TIMEOUT_S, a stall, or wait(timeout))."},
      {StatusCode::kMismatch, "MismatchError", nullptr, true,
       "Ranks disagree about a collective's parameters; the message names each rank's."},
      {StatusCode::kAborted, "AbortedError", nullptr, true,
       "The operation was cancelled: shutdown, or a failure elsewhere in the job."},
      {StatusCode::kUnavailable, "UnavailableError", nullptr, true,
       "A peer or service could not be reached (a lost rank is named)."},
      {StatusCode::kInternal, "InternalError", nullptr, true, "A bug in Hora."},
      {StatusCode::kUnimplemented, "UnimplementedError", PyExc_NotImplementedError, false,
       "A combination this build does not support."},
  };
  for (const Sub& s : subs) {
    std::vector<PyObject*> parents = {t.base};
    if (s.horovod_internal) parents.push_back(horovod_internal);
    if (s.extra_base != nullptr) parents.push_back(s.extra_base);
    PyObject* bases = PyTuple_New(static_cast<Py_ssize_t>(parents.size()));
    if (bases == nullptr) throw py::error_already_set();
    for (size_t i = 0; i < parents.size(); ++i) {
      Py_INCREF(parents[i]);
      PyTuple_SET_ITEM(bases, static_cast<Py_ssize_t>(i), parents[i]);  // steals the reference
    }
    t.by_code[static_cast<int>(s.code)] = NewType(m, s.name, bases, s.doc);
    Py_DECREF(bases);
  }
}

void ThrowIfError(const Status& st) {
  if (st.ok()) return;
  const Types& t = ErrorTypes();
  PyObject* type = t.by_code[static_cast<int>(st.code())];
  // The whole message, whatever a tensor's name holds: a NUL is written
  // \x00 (it would end a C string, and the text there), and bytes that are
  // not UTF-8 (a name cut short) as \xNN escapes.
  std::string text;
  text.reserve(st.message().size());
  for (char c : st.message()) {
    if (c == '\0') {
      text += "\\x00";
    } else {
      text += c;
    }
  }
  PyObject* value =
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "backslashreplace");
  if (value == nullptr) throw py::error_already_set();
  PyErr_SetObject(type ? type : t.base, value);
  Py_DECREF(value);
  throw py::error_already_set();
}

void ThrowInvalid(const std::string& message) {
  ThrowIfError(InvalidArgument(message));
  throw std::logic_error("unreachable");
}

}  // namespace hora::python
