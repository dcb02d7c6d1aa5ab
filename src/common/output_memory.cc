// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/output_memory.h"

#include <sys/mman.h>

#include <cstdlib>

namespace hora {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

size_t OutputMemoryBytes(size_t bytes) {
  return bytes >= kHugePage ? (bytes + 4095) / 4096 * 4096 : (bytes + 63) / 64 * 64;
}

void* OutputMemory(size_t bytes) {
  const size_t alloc = OutputMemoryBytes(bytes);
  if (alloc == 0) return nullptr;
  const bool huge = bytes >= kHugePage;
  void* p = nullptr;
  if (posix_memalign(&p, huge ? kHugePage : 64, alloc) != 0) std::abort();
  if (huge) madvise(p, alloc, MADV_HUGEPAGE);  // advice only: failure is harmless
  return p;
}

}  // namespace hora
