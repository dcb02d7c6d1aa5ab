// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Hora's errors at the Python boundary (the one place Status becomes an
// exception): HoraError (a RuntimeError) and one subclass per StatusCode.
#pragma once

#include <pybind11/pybind11.h>

#include "hora/status.h"

namespace hora::python {

// Creates the exception types in `m` (HoraError, InvalidArgumentError,
// MismatchError, HoraTimeoutError, AbortedError, UnavailableError,
// InternalError, UnimplementedError).
void RegisterErrors(pybind11::module_& m);

// Throws the exception for a non-OK `st` (with the GIL held).
void ThrowIfError(const Status& st);

// Throws InvalidArgumentError with `message`.
[[noreturn]] void ThrowInvalid(const std::string& message);

}  // namespace hora::python
