// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// hora._core's Handle (a collective in flight, as Python holds it) and what
// keeps a dropped one's tensors alive until it is done (Orphans).
#pragma once

#include <pybind11/pybind11.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dlpack_convert.h"
#include "errors.h"
#include "hora/hora.h"

namespace hora::python {
namespace py = pybind11;

// Collectives not yet done whose Python handles are gone.
class Orphans {
 public:
  void Add(Handle h, std::vector<Keepalive> keep) {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back({std::move(h), std::move(keep)});
  }
  // Releases the tensors of those now done (GIL held: owners may run
  // Python code as they go).
  void Sweep() {
    std::vector<Item> done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = items_.begin(); it != items_.end();) {
        if (it->handle.Poll()) {
          done.push_back(std::move(*it));
          it = items_.erase(it);
        } else {
          ++it;
        }
      }
    }
  }

 private:
  struct Item {
    Handle handle;
    std::vector<Keepalive> keep;
  };
  std::mutex mu_;
  std::vector<Item> items_;
};

// A finished collective's output, exported as a flat writeable byte buffer
// (Python's buffer protocol): one the binding made (`made`), else the one
// the handle owns.
struct OutputBuffer {
  Handle handle;
  std::shared_ptr<Tensor> made;
  const Tensor& tensor() const { return made ? *made : *handle.output(); }
};

class PyHandle {
 public:
  // `owner`: the process whose Session made the handle. `made`: the output
  // the binding made for the collective (Session::NewOutput), which
  // output() returns; else the handle's own, if any.
  PyHandle(Handle h, std::string name, std::vector<Keepalive> keep,
           std::shared_ptr<Orphans> orphans, pid_t owner, std::shared_ptr<Tensor> made = nullptr)
      : handle_(std::move(h)),
        name_(std::move(name)),
        keep_(std::move(keep)),
        orphans_(std::move(orphans)),
        owner_(owner),
        made_(std::move(made)) {}
  ~PyHandle() {
    if (!keep_.empty() && !handle_.Poll() && orphans_) orphans_->Add(handle_, std::move(keep_));
  }
  PyHandle(const PyHandle&) = delete;
  PyHandle& operator=(const PyHandle&) = delete;

  const std::string& name() const { return name_; }
  bool Poll() const { return handle_.Poll(); }

  // Waits (GIL released), in slices so that Ctrl-C reaches Python. With a
  // stream (a cudaStream_t), the results' last copies to the GPU are left to
  // that stream to wait for (Handle::StreamWait).
  void Wait(std::optional<double> timeout_s, std::optional<uint64_t> stream) {
    if (!Done(stream) && getpid() != owner_) {
      // A child forked after init(): the parent's engine finishes it, there.
      ThrowIfError(InvalidArgument(
          name_ + ": this process (pid " + std::to_string(getpid()) +
          ") was forked after the collective began; only the process that called init() (pid " +
          std::to_string(owner_) + ") can wait for it"));
    }
    WaitHere(timeout_s, stream);
  }
  // The same for a handle this process made (no check of that: getpid(),
  // a system call, is a few per cent of a small collective).
  void WaitHere(std::optional<double> timeout_s, std::optional<uint64_t> stream) {
    using namespace std::chrono;
    const auto slice = milliseconds(100);
    const auto start = timeout_s ? steady_clock::now() : steady_clock::time_point{};
    std::optional<Status> last;
    for (;;) {
      nanoseconds step = slice;
      if (timeout_s) {
        const auto left = duration_cast<nanoseconds>(duration<double>(*timeout_s)) -
                          (steady_clock::now() - start);
        if (left <= nanoseconds(0)) break;
        step = std::min<nanoseconds>(step, left);
      }
      {
        py::gil_scoped_release release;
        last = stream ? handle_.StreamWait(*stream, step) : handle_.Wait(step);
      }
      if (last->code() != StatusCode::kTimeout || Done(stream)) break;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
    if (!Done(stream) && (!last || last->code() == StatusCode::kTimeout)) {
      ThrowIfError(TimeoutError(name_ + ": not done after " +
                                std::to_string(timeout_s.value_or(0.0)) + " s"));
    }
    if (!last || last->code() == StatusCode::kTimeout) {
      // Done now (after a slice's timeout, or with a timeout of 0): its own
      // outcome, which may be a timeout error of the collective.
      last = stream ? handle_.StreamWait(*stream, nanoseconds(0)) : handle_.Wait(nanoseconds(0));
    }
    ThrowIfError(*last);
  }
  // Done as far as a wait with (or without) a stream goes.
  bool Done(const std::optional<uint64_t>& stream) const {
    return stream ? handle_.Finished() : handle_.Poll();
  }
  py::capsule Output() const {
    CheckOutput("output()");
    return made_ ? ExportView(made_->view(), made_) : ExportOutput(handle_);
  }

  // The same output as a writeable buffer (for NumPy, whose from_dlpack
  // arrays are read-only): np.frombuffer over it shares the memory.
  OutputBuffer OutputAsBuffer() const {
    CheckOutput("output_buffer()");
    const Device& d = made_ ? made_->device() : handle_.output()->device();
    if (d.type != DeviceType::kCPU) {
      ThrowInvalid(name_ + ": the output is on " + DeviceName(d) +
                   ", not host memory; take it with output() (DLPack)");
    }
    return OutputBuffer{handle_, made_};
  }

  std::vector<int64_t> ReceivedSplits() const {
    const std::vector<int64_t>* s = handle_.received_splits();
    if (s == nullptr) ThrowInvalid(name_ + ": received_splits() before the collective is done");
    return *s;
  }

 private:
  void CheckOutput(const char* what) const {
    if (!handle_.Poll()) ThrowInvalid(name_ + ": " + what + " before the collective is done");
    ThrowIfError(handle_.status());
    if (made_ == nullptr && handle_.output() == nullptr) {
      ThrowInvalid(name_ + ": this collective has no output tensor");
    }
  }

  Handle handle_;
  std::string name_;
  std::vector<Keepalive> keep_;
  std::shared_ptr<Orphans> orphans_;
  pid_t owner_;
  std::shared_ptr<Tensor> made_;
};

}  // namespace hora::python
