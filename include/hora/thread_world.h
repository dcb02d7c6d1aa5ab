// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// ThreadWorld: the shared state of a job whose ranks are threads of one
// process (an in-memory store and the loopback transport's mailboxes). Create
// one per simulated job and hand it to every rank's SessionOptions. Used by
// tests and by C++ programs that want to try Hora without launching processes.
#pragma once

#include <memory>

namespace hora {

class ThreadWorld {
 public:
  // (A size below 1 makes a world every Session::Create refuses.)
  static std::shared_ptr<ThreadWorld> Create(int size);
  ~ThreadWorld();

  int size() const;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  explicit ThreadWorld(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hora
