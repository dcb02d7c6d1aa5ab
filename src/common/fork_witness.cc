// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/fork_witness.h"

#include <sys/mman.h>
#include <unistd.h>

#include <new>

namespace hora {

ForkWitness::ForkWitness() : owner_(getpid()) {
  const long size = sysconf(_SC_PAGESIZE);
  void* p = mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return;
  if (madvise(p, static_cast<size_t>(size), MADV_WIPEONFORK) != 0) {
    munmap(p, static_cast<size_t>(size));
    return;
  }
  page_ = new (p) std::atomic<uint8_t>(1);
}

ForkWitness::~ForkWitness() {
  if (page_ != nullptr) munmap(page_, static_cast<size_t>(sysconf(_SC_PAGESIZE)));
}

bool ForkWitness::SlowInChild() const { return getpid() != owner_; }

}  // namespace hora
