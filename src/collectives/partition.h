// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Splitting a message of `count` elements into `parts` contiguous blocks
// whose sizes differ by at most one element (the first count % parts blocks
// get the extra one), and cutting blocks into pipeline segments.
#pragma once

#include <algorithm>
#include <cstddef>

namespace hora {

struct EvenPartition {
  size_t count;
  size_t parts;
  size_t offset(size_t b) const { return b * (count / parts) + std::min(b, count % parts); }
  size_t size(size_t b) const { return count / parts + (b < count % parts ? 1 : 0); }
};

// Number of segments of at most `segment` units covering `n` units (0 for 0).
inline size_t SegmentCount(size_t n, size_t segment) { return (n + segment - 1) / segment; }

}  // namespace hora
