// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A copy whose destination bypasses the cache: for a large output nobody
// reads soon, it skips reading each destination line into the cache before
// overwriting it (memcpy streams only above about 190 MiB on this machine's
// glibc, three quarters of a shared cache it believes is 480 MiB).
#pragma once

#include <cstddef>

namespace hora::kernels {

// Copies `bytes` from src to dst (not overlapping) with streaming stores on
// x86-64-v3/v4 (the head before a 64-byte boundary of dst and the tail
// with memcpy), with memcpy elsewhere. The stores are ordered (a store
// fence) before it returns. Thread-safe: no state.
void CopyStreaming(void* dst, const void* src, size_t bytes);

}  // namespace hora::kernels
