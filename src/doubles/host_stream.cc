// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "doubles/host_stream.h"

#include "common/thread_name.h"

namespace hora::gpu {

HostStream::HostStream()
    : worker_([this] {
        NameThisThread("hora-hoststream");
        Run();
      }) {}

HostStream::~HostStream() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void HostStream::Enqueue(std::function<void()> work) {
  {
    MutexLock lock(mu_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void HostStream::Drain() {
  MutexLock lock(mu_);
  idle_cv_.wait(lock.native(), [&]() HORA_REQUIRES(mu_) { return queue_.empty() && !running_; });
}

void HostStream::Run() {
  MutexLock lock(mu_);
  for (;;) {
    cv_.wait(lock.native(), [&]() HORA_REQUIRES(mu_) { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, all run
    std::function<void()> work = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    lock.native().unlock();
    work();
    lock.native().lock();
    running_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

}  // namespace hora::gpu
