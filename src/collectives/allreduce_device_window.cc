// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/allreduce_device_window.h"

#include <algorithm>
#include <string>
#include <vector>

#include "collectives/allreduce_common.h"
#include "collectives/allreduce_shared.h"
#include "collectives/shared_common.h"
#include "collectives/window_allreduce.h"
#include "kernels/reduce.h"

namespace hora {
namespace window_internal {

Status WindowAllreduce::Run() {
  const size_t total = parts_.total();
  const size_t chunk_max = w_.half_bytes() / esize_;
  bool first = true;
  size_t done = 0;
  // After a step that says a rank failed: alone, the collective ends there;
  // across hosts, this host stops (the same on each of its ranks) and the
  // exchanges go on to the end.
  const auto failed = [&] {
    if (verdict_.failed.empty()) return false;
    halted_ = true;
    halted_by_ = verdict_.first;
    halted_stuck_ = verdict_.stuck;
    return across_ == nullptr;
  };
  do {
    const size_t count = std::min(chunk_max, total - done);
    size_t half = 0;
    if (!halted_) {
      half = w_.NextHalf();
      comm_.window()->NextHalf();  // (the host window's halves keep in step too)
      if (mine_.ok()) mine_ = CopyIn(half, done, count);
      HORA_RETURN_IF_ERROR(Step(first, total));
      first = false;
      if (failed()) return Ended();
    }
    if (count * esize_ <= kOneStepMaxBytes) {
      FoldAll(half, done, count);
    } else {
      FoldPiece(half, count);
      if (!halted_) {
        HORA_RETURN_IF_ERROR(Step(false, total));
        if (failed()) return Ended();
      }
      if (working()) mine_ = CopyPiecesOut(half, done, count);
    }
    done += count;
  } while (done < total);
  if (across_ != nullptr) return Agree(total);
  return mine_;  // (a failure of the last copies out: this rank's alone)
}

Status WindowAllreduce::CopyIn(size_t half, size_t begin, size_t count) {
  std::byte* local = w_.region(comm_.rank(), half);
  copies_.clear();
  parts_.Visit(begin, begin + count, [&](const AllreducePart& p, size_t off, size_t at, size_t m) {
    copies_.push_back({local + (at - begin) * esize_,
                       static_cast<const std::byte*>(p.in) + off * esize_, m * esize_});
  });
  HORA_RETURN_IF_ERROR(dev_.BatchedCopy(copies_, w_.stream()));
  // bool goes through Scale(1.0) so that its values are 0/1, as on the CPU.
  if (count > 0 && (reduction_.prescale_factor != 1.0 || dtype_ == DataType::kBool)) {
    HORA_RETURN_IF_ERROR(
        dev_.Scale(dtype_, reduction_.prescale_factor, local, local, count, w_.stream()));
  }
  return Wait("copying the inputs into the GPU window");
}

void WindowAllreduce::FoldAll(size_t half, size_t begin, size_t count) {
  if (count == 0) return;
  size_t spans = 0;
  std::byte* only = nullptr;
  parts_.Visit(begin, begin + count, [&](const AllreducePart& p, size_t off, size_t, size_t) {
    ++spans;
    only = static_cast<std::byte*>(p.out) + off * esize_;
  });
  // Straight into the output when the chunk is one part's; else into the
  // scratch, copied out to the parts with one batched copy.
  std::byte* acc = spans == 1 ? only : w_.scratch();
  if (working()) {
    for (int k = 0; k < n_; ++k) srcs_[static_cast<size_t>(k)] = w_.region(k, half);
    mine_ = dev_.Reduce(dtype_, op_, acc, srcs_, count, w_.stream());
  }
  Across(acc, count);
  if (working()) mine_ = FinalizeAt(acc, count);
  if (spans == 1 || !working()) return;
  copies_.clear();
  parts_.Visit(begin, begin + count, [&](const AllreducePart& p, size_t off, size_t at, size_t m) {
    copies_.push_back(
        {static_cast<std::byte*>(p.out) + off * esize_, acc + (at - begin) * esize_, m * esize_});
  });
  mine_ = dev_.BatchedCopy(copies_, w_.stream());
}

Status WindowAllreduce::FinalizeAt(std::byte* data, size_t count) {
  if (!finalize_ || count == 0) return Status::Ok();
  return dev_.Finalize(dtype_, reduction_.op, world_, reduction_.postscale_factor, data, count,
                       w_.stream());
}

void WindowAllreduce::Piece(int k, size_t count, size_t* offset, size_t* len) const {
  // Pieces start on 256-byte boundaries (every element size divides 256),
  // where the GPU's kernels use their widest loads.
  const size_t align = 256 / esize_;
  const size_t piece = (count + static_cast<size_t>(n_) - 1) / static_cast<size_t>(n_);
  const size_t piece_max = (piece + align - 1) / align * align;
  *offset = std::min(count, static_cast<size_t>(k) * piece_max);
  *len = std::min(count, *offset + piece_max) - *offset;
}

void WindowAllreduce::FoldPiece(size_t half, size_t count) {
  size_t off = 0, len = 0;
  Piece(comm_.rank(), count, &off, &len);
  std::byte* acc = w_.region(comm_.rank(), half) + off * esize_;  // (one of the sources)
  if (len > 0 && working()) {
    for (int k = 0; k < n_; ++k) srcs_[static_cast<size_t>(k)] = w_.region(k, half) + off * esize_;
    mine_ = dev_.Reduce(dtype_, op_, acc, srcs_, len, w_.stream());
  }
  Across(acc, len);
  if (working()) mine_ = FinalizeAt(acc, len);
  if (working()) mine_ = Wait("reducing in the GPU window");
}

Status WindowAllreduce::CopyPiecesOut(size_t half, size_t begin, size_t count) {
  copies_.clear();
  for (int k = 0; k < n_; ++k) {
    size_t off = 0, len = 0;
    Piece(k, count, &off, &len);
    const std::byte* from = w_.region(k, half);
    parts_.Visit(begin + off, begin + off + len,
                 [&](const AllreducePart& p, size_t part_off, size_t at, size_t m) {
                   copies_.push_back({static_cast<std::byte*>(p.out) + part_off * esize_,
                                      from + (at - begin) * esize_, m * esize_});
                 });
  }
  return dev_.BatchedCopy(copies_, w_.stream());
}

Status WindowAllreduce::Step(bool first, size_t total, RankState heard) {
  RankState state = heard;
  if (!mine_.ok()) {
    if (!drained_ && !stuck_) drained_ = Wait("after a failure").ok();
    state = drained_ ? RankState::kFailed : RankState::kStuck;
  }
  const Status st = first ? SharedFirstStepFlagged(comm_, SharedCall::kDeviceAllreduce, dtype_,
                                                   total * esize_, state, &verdict_)
                          : SharedFlaggedStep(comm_, state, &verdict_);
  // A device that may still read the windows: no rank writes them again.
  if (st.ok() && verdict_.stuck) w_.Retire();
  return st;
}

Status WindowAllreduce::Ended() const {
  if (!mine_.ok()) return mine_;
  // (Across hosts, a rank's exchange may have failed instead.)
  const std::string on = across_ == nullptr ? (verdict_.several ? " on their GPUs" : " on its GPU")
                         : verdict_.several ? " on their GPUs or in their exchanges across hosts"
                                            : " on its GPU or in its exchange across hosts";
  return AbortedError(comm_.Where() + ": " + verdict_.failed + " failed" + on +
                      " during this allreduce; results without " +
                      (verdict_.several ? "their" : "its") +
                      " data would be wrong, so it fails on every rank" +
                      (verdict_.stuck ? " (and the GPU windows are given up: GPU allreduce is "
                                        "staged from now on)"
                                      : ""));
}

}  // namespace window_internal

Status AllreduceDeviceWindow(Comm& comm, DeviceWindow& window, std::span<const AllreducePart> parts,
                             DataType dtype, const Reduction& reduction,
                             const AcrossHosts* across) {
  CollectiveScope scope(comm, "allreduce", "gpu_window");
  return window_internal::WindowAllreduce(comm, window, parts, dtype, reduction, across).Run();
}

}  // namespace hora
