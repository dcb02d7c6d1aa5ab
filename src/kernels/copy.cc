// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "kernels/copy.h"

#include <cstdint>
#include <cstring>

#include "kernels/elementwise.h"
#include "kernels/isa.h"
#include "kernels/x86_simd.h"

namespace hora::kernels {
namespace internal {
namespace {

template <Isa kIsa>
HORA_KERNEL_INLINE void StreamBody(char* dst, const char* src, size_t bytes) {
  const size_t head =
      (kStreamAlign - reinterpret_cast<uintptr_t>(dst) % kStreamAlign) % kStreamAlign;
  if (bytes < head + kStreamAlign) {
    std::memcpy(dst, src, bytes);
    return;
  }
  std::memcpy(dst, src, head);
  const size_t body = (bytes - head) / kStreamAlign * kStreamAlign;
  StreamCopy<kIsa>(dst + head, src + head, body);
  StoreFence();
  std::memcpy(dst + head + body, src + head + body, bytes - head - body);
}

HORA_TARGET_X86V3 void CopyStreamingX86V3(char* dst, const char* src, size_t bytes) {
  StreamBody<Isa::kX86V3>(dst, src, bytes);
}

HORA_TARGET_X86V4 void CopyStreamingX86V4(char* dst, const char* src, size_t bytes) {
  StreamBody<Isa::kX86V4>(dst, src, bytes);
}

}  // namespace

void CopyStreamingWith(Isa isa, void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  if (isa == Isa::kX86V4) {
    CopyStreamingX86V4(d, s, bytes);
  } else if (isa == Isa::kX86V3) {
    CopyStreamingX86V3(d, s, bytes);
  } else if (bytes > 0) {
    std::memcpy(d, s, bytes);
  }
}

}  // namespace internal

void CopyStreaming(void* dst, const void* src, size_t bytes) {
  internal::CopyStreamingWith(internal::BestIsa(), dst, src, bytes);
}

}  // namespace hora::kernels
