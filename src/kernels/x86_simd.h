// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The few kernel pieces that need x86 intrinsics, one function per
// instruction-set variant (isa.h): float16 <-> float32 conversion of a block
// with F16C, and non-temporal (streaming) copies. Each carries its target
// attribute, so it is inlined only into the entry function of the same
// variant. Elsewhere than x86-64 only kBaseline exists, and portable
// stand-ins (never called) keep the callers free of #ifs. Private to kernels/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/elementwise.h"
#include "kernels/half.h"
#include "kernels/isa.h"

namespace hora::kernels::internal {

// Streaming stores need this alignment of the destination.
inline constexpr size_t kStreamAlign = 64;

#if defined(__x86_64__)

#define HORA_TARGET_X86V3 __attribute__((target("arch=x86-64-v3")))
#define HORA_TARGET_X86V4 __attribute__((target("arch=x86-64-v4")))

// vcvtph2ps / vcvtps2ph are exact and round to nearest even, like half.h;
// a signaling NaN comes out quieted either way once stored as float16.
HORA_TARGET_X86V3 inline void F16ToF32X86V3(float* dst, const uint16_t* src, size_t n) {
  const size_t whole = n - n % 8;
  for (size_t i = 0; i < whole; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (size_t i = whole; i < n; ++i) dst[i] = Float16ToFloat(src[i]);
}

HORA_TARGET_X86V3 inline void F32ToF16X86V3(uint16_t* dst, const float* src, size_t n) {
  const size_t whole = n - n % 8;
  for (size_t i = 0; i < whole; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (size_t i = whole; i < n; ++i) dst[i] = FloatToFloat16(src[i]);
}

// The maskz_ forms, even with all lanes, avoid GCC 12's false
// -Wmaybe-uninitialized on the unmasked intrinsics' undefined pass-through.
inline constexpr __mmask16 kAll16 = 0xffff;

HORA_TARGET_X86V4 inline void F16ToF32X86V4(float* dst, const uint16_t* src, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_ps(dst + i, _mm512_maskz_cvtph_ps(kAll16, h));
  }
  if (i < n) {
    auto mask = static_cast<__mmask16>((1u << (n - i)) - 1u);
    __m256i h = _mm256_maskz_loadu_epi16(mask, src + i);
    _mm512_mask_storeu_ps(dst + i, mask, _mm512_maskz_cvtph_ps(mask, h));
  }
}

HORA_TARGET_X86V4 inline void F32ToF16X86V4(uint16_t* dst, const float* src, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i h = _mm512_maskz_cvtps_ph(kAll16, _mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), h);
  }
  if (i < n) {
    auto mask = static_cast<__mmask16>((1u << (n - i)) - 1u);
    __m256i h = _mm512_maskz_cvtps_ph(mask, _mm512_maskz_loadu_ps(mask, src + i),
                                      _MM_FROUND_TO_NEAREST_INT);
    _mm256_mask_storeu_epi16(dst + i, mask, h);
  }
}

// Copies `bytes` (a multiple of 64) from src to dst (kStreamAlign-aligned)
// with stores that bypass the cache; the caller ends with StoreFence().
HORA_TARGET_X86V3 inline void StreamCopyX86V3(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<__m256i*>(dst);
  const auto* s = static_cast<const __m256i*>(src);
  for (size_t i = 0; i < bytes / 32; ++i) _mm256_stream_si256(d + i, _mm256_loadu_si256(s + i));
}

HORA_TARGET_X86V4 inline void StreamCopyX86V4(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<__m512i*>(dst);
  const auto* s = static_cast<const __m512i*>(src);
  for (size_t i = 0; i < bytes / 64; ++i) _mm512_stream_si512(d + i, _mm512_loadu_si512(s + i));
}

inline void StoreFence() { _mm_sfence(); }

#else  // !defined(__x86_64__)

#define HORA_TARGET_X86V3
#define HORA_TARGET_X86V4

inline void F16ToF32X86V3(float* dst, const uint16_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Float16ToFloat(src[i]);
}
inline void F32ToF16X86V3(uint16_t* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = FloatToFloat16(src[i]);
}
inline void F16ToF32X86V4(float* dst, const uint16_t* src, size_t n) { F16ToF32X86V3(dst, src, n); }
inline void F32ToF16X86V4(uint16_t* dst, const float* src, size_t n) { F32ToF16X86V3(dst, src, n); }
inline void StreamCopyX86V3(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}
inline void StreamCopyX86V4(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}
inline void StoreFence() {}

#endif  // defined(__x86_64__)

// Dispatch on a variant known at compile time (never kBaseline).
template <Isa kIsa>
HORA_KERNEL_INLINE void F16ToF32(float* dst, const uint16_t* src, size_t n) {
  if constexpr (kIsa == Isa::kX86V4) {
    F16ToF32X86V4(dst, src, n);
  } else {
    F16ToF32X86V3(dst, src, n);
  }
}

template <Isa kIsa>
HORA_KERNEL_INLINE void F32ToF16(uint16_t* dst, const float* src, size_t n) {
  if constexpr (kIsa == Isa::kX86V4) {
    F32ToF16X86V4(dst, src, n);
  } else {
    F32ToF16X86V3(dst, src, n);
  }
}

template <Isa kIsa>
HORA_KERNEL_INLINE void StreamCopy(void* dst, const void* src, size_t bytes) {
  if constexpr (kIsa == Isa::kX86V4) {
    StreamCopyX86V4(dst, src, bytes);
  } else {
    StreamCopyX86V3(dst, src, bytes);
  }
}

}  // namespace hora::kernels::internal
