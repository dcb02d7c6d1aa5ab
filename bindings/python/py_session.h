// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The Session as hora._core holds it (PySession): made and shut down with
// the GIL released, its calls' handles wrapped for Python (PyHandle), and
// the one-call forms waited for here (Run, RunForOutput).
#pragma once

#include <pybind11/pybind11.h>
#include <sys/types.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "errors.h"
#include "hora/hora.h"
#include "py_handle.h"

namespace hora::python {
namespace py = pybind11;

// Python's op codes are Horovod's (hvd.Average is 0, as in horovod.torch):
// ReduceOp by code.
inline constexpr ReduceOp kOpsByHorovodCode[] = {ReduceOp::kAverage, ReduceOp::kSum,
                                                 ReduceOp::kAdasum,  ReduceOp::kMin,
                                                 ReduceOp::kMax,     ReduceOp::kProduct};
inline int HorovodCode(ReduceOp op) {
  for (int c = 0; c < 6; ++c) {
    if (kOpsByHorovodCode[c] == op) return c;
  }
  return -1;
}
inline Reduction MakeReduction(int op, double prescale, double postscale) {
  if (op < 0 || op >= 6) {
    ThrowInvalid("unknown reduction op " + std::to_string(op) +
                 " (Average=0, Sum=1, Adasum=2, Min=3, Max=4, Product=5, as Horovod's)");
  }
  return {kOpsByHorovodCode[op], prescale, postscale};
}

class PySession {
 public:
  explicit PySession(const std::optional<std::map<std::string, std::string>>& settings) {
    SessionOptions opts;
    if (settings) opts.settings = *settings;
    Result<std::unique_ptr<Session>> s = [&] {
      py::gil_scoped_release release;
      return Session::Create(opts);
    }();
    ThrowIfError(s.status());
    session_ = std::move(*s);
  }
  ~PySession() {
    py::gil_scoped_release release;
    session_.reset();
  }

  Session& Get() {
    if (!session_) ThrowIfError(AbortedError("hora was shut down; call init() again"));
    orphans_->Sweep();
    return *session_;
  }
  const Session& Get() const { return const_cast<PySession*>(this)->Get(); }
  // For a call that blocks with the GIL released: the Session stays alive
  // through it even if another thread calls shutdown() meanwhile (an
  // exception ending the main thread does); the caller drops it without
  // the GIL, where it may be the last owner.
  std::shared_ptr<Session> Share() {
    Get();
    return session_;
  }

  void Shutdown() {
    // Taken out with the GIL held (another thread's Get() or Share() reads
    // session_ under it), dropped without it.
    std::shared_ptr<Session> dying;
    dying.swap(session_);
    {
      py::gil_scoped_release release;
      dying.reset();  // fails every unfinished handle (where it was the last owner)
    }
    orphans_->Sweep();
  }

  // A call the engine refused as it was submitted (a name already in flight,
  // a process set this rank is not in; bad arguments only where the call
  // was done by then: a refusal otherwise waits for the other ranks, see
  // EngineCall::Submit) raises here, from the submitting call, as Horovod's do
  // (ValueError: InvalidArgumentError is one); errors found later, with the
  // other ranks, come from the handle's wait.
  std::unique_ptr<PyHandle> Wrap(Handle h, std::string name, std::vector<Keepalive> keep,
                                 std::shared_ptr<Tensor> made = nullptr) {
    if (h.Poll() && h.status().code() == StatusCode::kInvalidArgument) ThrowIfError(h.status());
    return std::make_unique<PyHandle>(std::move(h), std::move(name), std::move(keep), orphans_,
                                      owner_, std::move(made));
  }
  // Waits for `h` here, as a handle's wait() without a timeout would (its
  // tensors kept until it is done, even if the wait is interrupted).
  // (`h` was made by this process just now, and the Session fails a call
  // in a child forked after init(): no need to ask whose process this is.)
  void Run(Handle h, std::string name, std::vector<Keepalive> keep) {
    if (h.Poll() && h.status().code() == StatusCode::kInvalidArgument) ThrowIfError(h.status());
    PyHandle(std::move(h), std::move(name), std::move(keep), orphans_, owner_)
        .WaitHere(std::nullopt, std::nullopt);
  }
  // The same, then the handle, for its output.
  std::unique_ptr<PyHandle> RunForOutput(Handle h, std::string name, std::vector<Keepalive> keep) {
    if (h.Poll() && h.status().code() == StatusCode::kInvalidArgument) ThrowIfError(h.status());
    auto done = std::make_unique<PyHandle>(std::move(h), std::move(name), std::move(keep), orphans_,
                                           owner_);
    done->WaitHere(std::nullopt, std::nullopt);
    return done;
  }
  // The process that made this Session.
  pid_t owner() const { return owner_; }

 private:
  std::shared_ptr<Session> session_;
  std::shared_ptr<Orphans> orphans_ = std::make_shared<Orphans>();
  const pid_t owner_ = getpid();
};

}  // namespace hora::python
