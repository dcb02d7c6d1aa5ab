// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Allreduce on a shared window (transport/shared_window.h): each rank copies
// its (prescaled) input once into its own region, and the others read it in
// place. A message is cut into chunks of half a region; the halves alternate
// (NextHalf) so that a chunk's data stays readable while the next is written.
//  - Small chunks, one step: every rank reduces all n regions, in rank order,
//    straight into its output (each rank reads n chunks; identical results
//    everywhere since every rank folds in the same order).
//  - Larger chunks, two steps: rank r reduces piece r of the chunk from every
//    region into its own region's piece r (which only it reads until the
//    next step) and finalizes it (average, postscale); after the second step
//    every rank copies each piece from its owner's region. Each rank reads
//    the chunk about twice instead of n times.
// Against the point-to-point algorithms: one copy in, one copy out, and 1 or
// 2 lockstep steps per chunk instead of 2(n-1) or 2 log2(n) message rounds.
#include <algorithm>
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/allreduce_common.h"
#include "collectives/kernels/reduce.h"
#include "collectives/shared_common.h"

namespace hora {
namespace {

// Chunks of at most this many bytes take the one-step path.
constexpr size_t kOneStepMaxBytes = 16 * 1024;

// Copies (or prescales) `count` elements of `in` to `dst`.
void CopyIn(const AllreduceArgs& args, void* dst, const void* in, size_t count) {
  if (args.reduction.prescale_factor != 1.0 || args.dtype == DataType::kBool) {
    // bool goes through Scale(1.0) so that its values are 0/1 (as the prologue).
    kernels::Scale(args.dtype, args.reduction.prescale_factor, dst, in, count);
  } else {
    std::memcpy(dst, in, count * DataTypeSize(args.dtype));
  }
}

}  // namespace

Status AllreduceShared(Comm& comm, const AllreduceArgs& args) {
  CollectiveScope scope(comm, "allreduce", "shared_memory");
  const int n = comm.size();
  const size_t esize = DataTypeSize(args.dtype);
  if (n == 1) {
    AllreducePrologue(args);
    AllreduceFinalize(args, n, 0, args.count);
    return Status::Ok();
  }
  SharedWindow& w = *comm.window();
  const ReduceOp op = ReducingOp(args.reduction.op);
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);
  // Pieces start on 64-byte boundaries (every element size divides 64).
  const size_t align = 64 / esize;
  const size_t half_bytes = w.bytes() / 2;
  const size_t chunk_max = half_bytes / esize;

  bool first = true;
  size_t done = 0;
  do {
    const size_t count = std::min(chunk_max, args.count - done);
    const size_t bytes = count * esize;
    const size_t half = w.NextHalf() * half_bytes;
    std::byte* mine = w.local() + half;
    CopyIn(args, mine, in + done * esize, count);
    if (first) {
      HORA_RETURN_IF_ERROR(
          SharedFirstStep(comm, SharedCall::kAllreduce, args.dtype, args.count * esize));
      first = false;
    } else {
      HORA_RETURN_IF_ERROR(comm.WindowStep(0));
    }
    std::byte* dst = out + done * esize;
    if (bytes <= kOneStepMaxBytes) {
      if (count > 0) {
        kernels::Reduce3(args.dtype, op, dst, w.region(0) + half, w.region(1) + half, count);
        for (int k = 2; k < n; ++k) kernels::Reduce(args.dtype, op, dst, w.region(k) + half, count);
        AllreduceFinalize(args, n, done, count);
      }
    } else {
      const size_t piece = (count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n);
      const size_t piece_max = (piece + align - 1) / align * align;
      auto piece_range = [&](int k, size_t* offset, size_t* size) {
        *offset = std::min(count, static_cast<size_t>(k) * piece_max);
        *size = std::min(count, *offset + piece_max) - *offset;
      };
      size_t off = 0, len = 0;
      piece_range(comm.rank(), &off, &len);
      if (len > 0) {
        std::byte* acc = mine + off * esize;
        for (int k = 0; k < n; ++k) {
          if (k == comm.rank()) continue;
          kernels::Reduce(args.dtype, op, acc, w.region(k) + half + off * esize, len);
        }
        if (kernels::NeedsFinalize(args.dtype, args.reduction.op, n,
                                   args.reduction.postscale_factor)) {
          kernels::Finalize(args.dtype, args.reduction.op, n, args.reduction.postscale_factor, acc,
                            len);
        }
      }
      HORA_RETURN_IF_ERROR(comm.WindowStep(0));
      for (int k = 0; k < n; ++k) {
        piece_range(k, &off, &len);
        if (len > 0) std::memcpy(dst + off * esize, w.region(k) + half + off * esize, len * esize);
      }
    }
    done += count;
  } while (done < args.count);
  return Status::Ok();
}

}  // namespace hora
