// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Pieces shared by the allreduce algorithms: the prologue that places the
// (prescaled) input in the output buffer, the finalization (average,
// postscale) of a reduced range, and the folding of a non-power-of-two world
// onto a power of two used by the recursive algorithms.
#pragma once

#include "collectives/algorithms.h"

namespace hora {

// out = in * prescale (or a plain copy, or nothing when in place and
// prescale is 1).
void AllreducePrologue(const AllreduceArgs& args);

// Applies the average division and postscale to out[offset, offset + count).
void AllreduceFinalize(const AllreduceArgs& args, int world_size, size_t offset, size_t count);

// The element-wise op used while reducing (kAverage reduces as kSum).
ReduceOp ReducingOp(ReduceOp op);

// Rank layout of the recursive algorithms on n ranks: p = largest power of
// two <= n; the first 2*(n-p) ranks pair up (even -> odd) so that p ranks
// remain, numbered by a virtual rank.
struct PowerOfTwoFold {
  explicit PowerOfTwoFold(int n, int rank);
  int p;      // ranks left after folding
  int extra;  // n - p
  int vrank;  // virtual rank in [0, p), or -1 when this rank folded away
  // Real rank of virtual rank v.
  int Real(int v) const { return v < extra ? 2 * v + 1 : v + extra; }
  bool FoldedAway() const { return vrank < 0; }
  // For ranks < 2*extra: the partner of the fold (even <-> odd).
  int fold_partner;  // -1 when this rank is not part of a fold pair
};

}  // namespace hora
