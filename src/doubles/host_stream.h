// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A stream of the host device: a worker thread that runs the work queued on
// it in order, asynchronously to whoever queued it -- so that work queued
// without the waits it needs gives wrong results here as on a GPU.
//
// Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>

#include "common/mutex.h"

namespace hora::gpu {

class HostStream {
 public:
  HostStream();
  ~HostStream();  // runs what is queued, then ends the worker
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  void Enqueue(std::function<void()> work) HORA_EXCLUDES(mu_);
  // Waits until everything queued so far has run.
  void Drain() HORA_EXCLUDES(mu_);

 private:
  void Run() HORA_EXCLUDES(mu_);

  Mutex mu_;
  std::condition_variable cv_;       // work queued, or stopping
  std::condition_variable idle_cv_;  // the queue ran dry
  std::deque<std::function<void()>> queue_ HORA_GUARDED_BY(mu_);
  bool running_ HORA_GUARDED_BY(mu_) = false;  // the worker is in a piece of work
  bool stop_ HORA_GUARDED_BY(mu_) = false;
  std::thread worker_;
};

}  // namespace hora::gpu
