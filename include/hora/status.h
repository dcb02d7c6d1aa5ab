// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Status and Result<T>: the error style of every C++ layer of Hora.
//
// A function that can fail returns a Status (or a Result<T> holding either a
// value or a non-OK Status). Exceptions are not used inside the library; the
// Python bindings turn a non-OK Status into an exception at the boundary.
//
// Messages are written for the person reading them: they name the rank, the
// operation, the tensor and the values involved, e.g.
//   "rank 2: allreduce 'grad/fc1' (ring): timed out after 30s waiting for
//    64 KiB from rank 1"
//
// Thread-safety: Status and Result are values; distinct objects may be used
// from different threads freely.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace hora {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,  // the caller passed something unusable
  kTimeout,          // a bounded wait expired (HORA_TIMEOUT_S)
  kMismatch,         // ranks disagree about a collective's parameters
  kAborted,          // the operation was cancelled (shutdown, peer failure)
  kUnavailable,      // a peer or service could not be reached
  kInternal,         // a bug in Hora
  kUnimplemented,    // a combination that is not supported
};

// Returns a short name such as "InvalidArgument".
const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  // An OK status.
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "InvalidArgument: <message>", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context + ": "`, so that
  // each layer an error passes through can leave a breadcrumb.
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status TimeoutError(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }
inline Status MismatchError(std::string m) { return {StatusCode::kMismatch, std::move(m)}; }
inline Status AbortedError(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status UnimplementedError(std::string m) {
  return {StatusCode::kUnimplemented, std::move(m)};
}

// Either a T or a non-OK Status. Accessing value() of an error is a bug
// (asserted in debug builds).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "Result constructed from an OK status without a value");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace hora

// Returns early from the enclosing function when `expr` yields a non-OK Status.
#define HORA_RETURN_IF_ERROR(expr)       \
  do {                                   \
    ::hora::Status _hora_st = (expr);    \
    if (!_hora_st.ok()) return _hora_st; \
  } while (0)

#define HORA_CONCAT_INNER(a, b) a##b
#define HORA_CONCAT(a, b) HORA_CONCAT_INNER(a, b)

// `HORA_ASSIGN_OR_RETURN(auto x, MakeX());` assigns the value or returns the error.
#define HORA_ASSIGN_OR_RETURN(lhs, expr)                                                          \
  auto HORA_CONCAT(_hora_res_, __LINE__) = (expr);                                                \
  if (!HORA_CONCAT(_hora_res_, __LINE__).ok()) return HORA_CONCAT(_hora_res_, __LINE__).status(); \
  lhs = std::move(HORA_CONCAT(_hora_res_, __LINE__)).value()
