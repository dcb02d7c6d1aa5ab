// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Host memory for a collective's output (Tensor::Uninitialized, the output
// pool: output_pool.h). Large outputs are fresh memory on nearly every call
// (the allocator maps and unmaps them), and first-touch page faults cost
// microseconds each on a virtual machine: 4096 of them for 16 MiB took
// longer than the collective itself. From 2 MiB, a buffer is aligned to a
// huge page and advised so, and faults once per 2 MiB instead (where the
// kernel's THP mode is "madvise" or "always").
#pragma once

#include <cstddef>

namespace hora {

// The bytes OutputMemory takes for `bytes`: whole pages from 2 MiB (a
// 2 MiB + 64 B output must not take 4 MiB), else whole 64-byte lines.
size_t OutputMemoryBytes(size_t bytes);

// Uninitialised memory of OutputMemoryBytes(bytes) (none for 0), 64-byte
// aligned, or a huge page's from 2 MiB; given back with std::free. Aborts
// when there is no memory: nothing sensible to return.
void* OutputMemory(size_t bytes);

}  // namespace hora
