// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Tells a child forked from this process from this process itself, cheaply
// enough for every collective: one page advised MADV_WIPEONFORK, which reads
// as zeros in a child and as its mark here (a memory read; getpid(), a
// system call of about 100 ns, would cost each small collective a few per
// cent). Where the advice is not supported (Linux before 4.14), it falls
// back to comparing getpid() with the pid it was made in.
//
// Thread-safety: InChild() from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>

namespace hora {

class ForkWitness {
 public:
  ForkWitness();
  ~ForkWitness();
  ForkWitness(const ForkWitness&) = delete;
  ForkWitness& operator=(const ForkWitness&) = delete;

  // True in a process forked from the one that made this witness.
  bool InChild() const {
    if (page_ != nullptr) return page_->load(std::memory_order_relaxed) == 0;
    return SlowInChild();
  }
  // The pid of the process that made it.
  pid_t owner() const { return owner_; }

 private:
  bool SlowInChild() const;

  std::atomic<uint8_t>* page_ = nullptr;  // 1 here, 0 in a child (null: no advice)
  const pid_t owner_;
};

}  // namespace hora
