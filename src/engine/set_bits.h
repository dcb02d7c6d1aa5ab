// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace hora {

// Calls f(b) for every bit b < nbits that is set in `words` (skipping zero
// words: a cycle's vector is mostly empty).
template <typename F>
void ForEachSetBit(const uint64_t* words, size_t nbits, F&& f) {
  for (size_t w = 0; w * 64 < nbits; ++w) {
    for (uint64_t bits = words[w]; bits != 0; bits &= bits - 1) {
      const size_t b = w * 64 + static_cast<size_t>(std::countr_zero(bits));
      if (b >= nbits) return;
      f(b);
    }
  }
}

}  // namespace hora
