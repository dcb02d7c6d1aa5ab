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
//    the chunk about twice instead of n times. No other rank reads rank r's
//    copy of piece r, so unless the copy in scales, rank r leaves it out and
//    reads that piece from its input where it is (SharedOwnPiece). The copy
//    out of a large message's out-of-place parts bypasses the cache.
// Against the point-to-point algorithms: one copy in, one copy out, and 1 or
// 2 lockstep steps per chunk instead of 2(n-1) or 2 log2(n) message rounds.
// The message may be several tensors (parts) read and written where they
// are: the copy in packs them, the copy out unpacks them.
#include "collectives/allreduce_shared.h"

#include <cstring>

#include "collectives/allreduce_common.h"
#include "collectives/shared_common.h"
#include "kernels/copy.h"
#include "kernels/reduce.h"

namespace hora {
namespace {

// Chunks of at most this many bytes take the one-step path.
constexpr size_t kOneStepMaxBytes = 16 * 1024;
// Out-of-place outputs of messages at least this large are written with
// streaming stores (an output nobody reads before the call returns; in
// place, the copy out overwrites lines the copy in just read).
constexpr size_t kStreamOutMinBytes = size_t{4} << 20;

}  // namespace

SharedParts::SharedParts(std::span<const AllreducePart> parts) : parts_(parts) {
  size_t total = 0;
  starts_.reserve(parts.size());
  for (const AllreducePart& p : parts) {
    starts_.push_back(total);
    total += p.count;
  }
  total_ = total;
}

namespace {

bool CopyInScales(DataType dtype, const Reduction& reduction) {
  // bool goes through Scale(1.0) so that its values are 0/1 (as the prologue).
  return reduction.prescale_factor != 1.0 || dtype == DataType::kBool;
}

// Pieces start on 64-byte boundaries (every element size divides 64): piece
// k of a two-step chunk of `count` elements on n ranks.
ChunkPiece PieceOf(int k, int n, size_t esize, size_t count) {
  const size_t align = 64 / esize;
  const size_t piece = (count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n);
  const size_t piece_max = (piece + align - 1) / align * align;
  const size_t offset = std::min(count, static_cast<size_t>(k) * piece_max);
  return {offset, std::min(count, offset + piece_max) - offset};
}

}  // namespace

ChunkPiece SharedOwnPiece(const Comm& comm, DataType dtype, const Reduction& reduction,
                          size_t count) {
  const size_t esize = DataTypeSize(dtype);
  if (comm.size() < 2 || count * esize <= kOneStepMaxBytes || CopyInScales(dtype, reduction))
    return {};
  return PieceOf(comm.rank(), comm.size(), esize, count);
}

void SharedCopyIn(const SharedParts& parts, DataType dtype, const Reduction& reduction,
                  size_t begin, size_t count, std::byte* dst, ChunkPiece skip) {
  const size_t esize = DataTypeSize(dtype);
  const bool scales = CopyInScales(dtype, reduction);
  auto copy = [&](size_t from, size_t to_end) {
    parts.Visit(from, to_end, [&](const AllreducePart& p, size_t off, size_t at, size_t n) {
      const auto* src = static_cast<const std::byte*>(p.in) + off * esize;
      std::byte* to = dst + (at - begin) * esize;
      if (scales) {
        kernels::Scale(dtype, reduction.prescale_factor, to, src, n);
      } else {
        std::memcpy(to, src, n * esize);
      }
    });
  };
  copy(begin, begin + skip.offset);
  copy(begin + skip.offset + skip.size, begin + count);
}

Status SharedReduceChunk(Comm& comm, const SharedParts& parts, DataType dtype,
                         const Reduction& reduction, size_t base, size_t begin, size_t count,
                         ChunkPiece skipped) {
  const int n = comm.size();
  const size_t esize = DataTypeSize(dtype);
  const ReduceOp op = ReducingOp(reduction.op);
  const bool finalize = kernels::NeedsFinalize(dtype, reduction.op, n, reduction.postscale_factor);
  SharedWindow& w = *comm.window();
  if (count * esize <= kOneStepMaxBytes) {
    // Reduced where it goes if the chunk is one part's; a chunk of several
    // parts (a fused batch of small tensors) is reduced whole, then copied
    // out: n kernel calls instead of n per part.
    size_t spans = 0;
    parts.Visit(begin, begin + count,
                [&](const AllreducePart&, size_t, size_t, size_t) { ++spans; });
    alignas(64) std::byte scratch[kOneStepMaxBytes];
    auto reduce = [&](std::byte* dst, size_t src, size_t len) {
      kernels::Reduce3(dtype, op, dst, w.region(0) + src, w.region(1) + src, len);
      for (int k = 2; k < n; ++k) kernels::Reduce(dtype, op, dst, w.region(k) + src, len);
      if (finalize) kernels::Finalize(dtype, reduction.op, n, reduction.postscale_factor, dst, len);
    };
    if (spans > 1) reduce(scratch, base, count);
    parts.Visit(begin, begin + count,
                [&](const AllreducePart& p, size_t off, size_t at, size_t len) {
                  auto* dst = static_cast<std::byte*>(p.out) + off * esize;
                  if (spans > 1) {
                    std::memcpy(dst, scratch + (at - begin) * esize, len * esize);
                  } else {
                    reduce(dst, base + (at - begin) * esize, len);
                  }
                });
    return Status::Ok();
  }
  const ChunkPiece mine = PieceOf(comm.rank(), n, esize, count);
  if (mine.size > 0) {
    const size_t off = mine.offset, len = mine.size;
    std::byte* acc = w.local() + base + off * esize;
    int k = 0;
    if (skipped.size > 0) {
      // Not copied in (SharedOwnPiece): the first other rank's copy is
      // folded into this rank's input, read where it is, in the same order.
      k = comm.rank() == 0 ? 1 : 0;
      parts.Visit(begin + off, begin + off + len,
                  [&](const AllreducePart& p, size_t part_off, size_t at, size_t m) {
                    const size_t at_chunk = (at - begin) * esize;
                    kernels::Reduce3(dtype, op, w.local() + base + at_chunk,
                                     static_cast<const std::byte*>(p.in) + part_off * esize,
                                     w.region(k) + base + at_chunk, m);
                  });
      ++k;
    }
    for (; k < n; ++k) {
      if (k == comm.rank()) continue;
      kernels::Reduce(dtype, op, acc, w.region(k) + base + off * esize, len);
    }
    if (finalize) kernels::Finalize(dtype, reduction.op, n, reduction.postscale_factor, acc, len);
  }
  HORA_RETURN_IF_ERROR(comm.WindowStep(0));
  const bool stream = parts.total() * esize >= kStreamOutMinBytes;
  for (int k = 0; k < n; ++k) {
    const auto [off, len] = PieceOf(k, n, esize, count);
    const std::byte* from = w.region(k) + base;
    parts.Visit(begin + off, begin + off + len,
                [&](const AllreducePart& p, size_t part_off, size_t at, size_t m) {
                  auto* to = static_cast<std::byte*>(p.out) + part_off * esize;
                  if (stream && p.out != p.in) {
                    kernels::CopyStreaming(to, from + (at - begin) * esize, m * esize);
                  } else {
                    std::memcpy(to, from + (at - begin) * esize, m * esize);
                  }
                });
  }
  return Status::Ok();
}

Status AllreducePartsShared(Comm& comm, std::span<const AllreducePart> part_list, DataType dtype,
                            const Reduction& reduction) {
  CollectiveScope scope(comm, "allreduce", "shared_memory");
  const int n = comm.size();
  const size_t esize = DataTypeSize(dtype);
  const SharedParts parts(part_list);
  const size_t total = parts.total();
  if (n == 1) {
    for (const AllreducePart& p : part_list) {
      AllreduceArgs args{p.in, p.out, p.count, dtype, reduction};
      AllreducePrologue(args);
      AllreduceFinalize(args, n, 0, p.count);
    }
    return Status::Ok();
  }
  SharedWindow& w = *comm.window();
  const size_t half_bytes = w.bytes() / 2;
  const size_t chunk_max = half_bytes / esize;

  bool first = true;
  size_t done = 0;
  do {
    const size_t count = std::min(chunk_max, total - done);
    const size_t half = w.NextHalf() * half_bytes;
    const ChunkPiece own = SharedOwnPiece(comm, dtype, reduction, count);
    SharedCopyIn(parts, dtype, reduction, done, count, w.local() + half, own);
    if (first) {
      HORA_RETURN_IF_ERROR(SharedFirstStep(comm, SharedCall::kAllreduce, dtype, total * esize));
      first = false;
    } else {
      HORA_RETURN_IF_ERROR(comm.WindowStep(0));
    }
    HORA_RETURN_IF_ERROR(SharedReduceChunk(comm, parts, dtype, reduction, half, done, count, own));
    done += count;
  } while (done < total);
  return Status::Ok();
}

Status AllreduceShared(Comm& comm, const AllreduceArgs& args) {
  const AllreducePart part{args.in, args.out, args.count};
  return AllreducePartsShared(comm, std::span<const AllreducePart>(&part, 1), args.dtype,
                              args.reduction);
}

}  // namespace hora
