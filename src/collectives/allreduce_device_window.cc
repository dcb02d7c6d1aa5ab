// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/allreduce_device_window.h"

#include <algorithm>
#include <string>
#include <vector>

#include "collectives/allreduce_common.h"
#include "collectives/allreduce_shared.h"
#include "collectives/shared_common.h"
#include "kernels/reduce.h"

namespace hora {
namespace {

// Chunks of at most this many bytes take the one-step path.
constexpr size_t kOneStepMaxBytes = DeviceWindow::kScratchBytes;

// One rank's allreduce on the window: the chunk loop's state.
class WindowAllreduce {
 public:
  WindowAllreduce(Comm& comm, DeviceWindow& w, std::span<const AllreducePart> parts, DataType dtype,
                  const Reduction& reduction)
      : comm_(comm),
        w_(w),
        dev_(w.device()),
        parts_(parts),
        dtype_(dtype),
        reduction_(reduction),
        esize_(DataTypeSize(dtype)),
        n_(comm.size()),
        op_(ReducingOp(reduction.op)),
        finalize_(kernels::NeedsFinalize(dtype, reduction.op, n_, reduction.postscale_factor)),
        srcs_(static_cast<size_t>(n_)) {}

  Status Run();

 private:
  // Queues the chunk's copy into this rank's half `half` (and its prescale)
  // and waits for it.
  Status CopyIn(size_t half, size_t begin, size_t count);
  // The one-step path: every window's chunk folded into the outputs.
  Status FoldAll(size_t half, size_t begin, size_t count);
  // The two-step path's first half: piece `rank` folded into its window.
  Status FoldPiece(size_t half, size_t count);
  // ... and its second: every piece copied out of its owner's window.
  Status CopyPiecesOut(size_t half, size_t begin, size_t count);
  // Where piece k of a chunk of `count` elements starts, and its length.
  void Piece(int k, size_t count, size_t* offset, size_t* len) const;
  // A flagged step; after it, `verdict_` says which ranks failed. A rank
  // that failed first waits (bounded) for what its device was given, so
  // that its step still proves its device is done with the half.
  Status Step(bool first, size_t total);
  // The collective's end when a rank failed: this rank's own error, or one
  // naming the failed ranks.
  Status Ended() const;

  Comm& comm_;
  DeviceWindow& w_;
  gpu::Device& dev_;
  const SharedParts parts_;
  const DataType dtype_;
  const Reduction reduction_;
  const size_t esize_;
  const int n_;
  const ReduceOp op_;
  const bool finalize_;
  Status mine_;           // this rank's device failure, once there is one
  StepVerdict verdict_;   // what the last step said
  bool drained_ = false;  // (after a failure) this rank's device did all it was given
  bool stuck_ = false;    // a wait for this rank's device failed: it may still be at work
  // Waits for the device (w_.WaitDevice); a failure marks it stuck.
  Status Wait(const char* what) {
    Status st = w_.WaitDevice(what);
    stuck_ = stuck_ || !st.ok();
    return st;
  }
  std::vector<const void*> srcs_;
  std::vector<gpu::CopyPart> copies_;
};

Status WindowAllreduce::Run() {
  const size_t total = parts_.total();
  const size_t chunk_max = w_.half_bytes() / esize_;
  bool first = true;
  size_t done = 0;
  do {
    const size_t count = std::min(chunk_max, total - done);
    const size_t half = w_.NextHalf();
    comm_.window()->NextHalf();  // (the host window's halves keep in step too)
    if (mine_.ok()) mine_ = CopyIn(half, done, count);
    HORA_RETURN_IF_ERROR(Step(first, total));
    first = false;
    if (!verdict_.failed.empty()) return Ended();
    if (count * esize_ <= kOneStepMaxBytes) {
      if (mine_.ok()) mine_ = FoldAll(half, done, count);
    } else {
      if (mine_.ok()) mine_ = FoldPiece(half, count);
      HORA_RETURN_IF_ERROR(Step(false, total));
      if (!verdict_.failed.empty()) return Ended();
      if (mine_.ok()) mine_ = CopyPiecesOut(half, done, count);
    }
    done += count;
  } while (done < total);
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

Status WindowAllreduce::FoldAll(size_t half, size_t begin, size_t count) {
  if (count == 0) return Status::Ok();
  for (int k = 0; k < n_; ++k) srcs_[static_cast<size_t>(k)] = w_.region(k, half);
  size_t spans = 0;
  std::byte* only = nullptr;
  parts_.Visit(begin, begin + count, [&](const AllreducePart& p, size_t off, size_t, size_t) {
    ++spans;
    only = static_cast<std::byte*>(p.out) + off * esize_;
  });
  // Straight into the output when the chunk is one part's; else into the
  // scratch, copied out to the parts with one batched copy.
  std::byte* acc = spans == 1 ? only : w_.scratch();
  HORA_RETURN_IF_ERROR(dev_.Reduce(dtype_, op_, acc, srcs_, count, w_.stream()));
  if (finalize_) {
    HORA_RETURN_IF_ERROR(dev_.Finalize(dtype_, reduction_.op, n_, reduction_.postscale_factor, acc,
                                       count, w_.stream()));
  }
  if (spans == 1) return Status::Ok();
  copies_.clear();
  parts_.Visit(begin, begin + count, [&](const AllreducePart& p, size_t off, size_t at, size_t m) {
    copies_.push_back(
        {static_cast<std::byte*>(p.out) + off * esize_, acc + (at - begin) * esize_, m * esize_});
  });
  return dev_.BatchedCopy(copies_, w_.stream());
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

Status WindowAllreduce::FoldPiece(size_t half, size_t count) {
  size_t off = 0, len = 0;
  Piece(comm_.rank(), count, &off, &len);
  if (len > 0) {
    for (int k = 0; k < n_; ++k) srcs_[static_cast<size_t>(k)] = w_.region(k, half) + off * esize_;
    std::byte* acc = w_.region(comm_.rank(), half) + off * esize_;  // (one of the sources)
    HORA_RETURN_IF_ERROR(dev_.Reduce(dtype_, op_, acc, srcs_, len, w_.stream()));
    if (finalize_) {
      HORA_RETURN_IF_ERROR(dev_.Finalize(dtype_, reduction_.op, n_, reduction_.postscale_factor,
                                         acc, len, w_.stream()));
    }
  }
  return Wait("reducing in the GPU window");
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

Status WindowAllreduce::Step(bool first, size_t total) {
  RankState state = RankState::kOk;
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
  return AbortedError(comm_.Where() + ": " + verdict_.failed +
                      (verdict_.several ? " failed on their GPUs" : " failed on its GPU") +
                      " during this allreduce; results without " +
                      (verdict_.several ? "their" : "its") +
                      " data would be wrong, so it fails on every rank" +
                      (verdict_.stuck ? " (and the GPU windows are given up: GPU allreduce is "
                                        "staged from now on)"
                                      : ""));
}

}  // namespace

Status AllreduceDeviceWindow(Comm& comm, DeviceWindow& window, std::span<const AllreducePart> parts,
                             DataType dtype, const Reduction& reduction) {
  CollectiveScope scope(comm, "allreduce", "gpu_window");
  return WindowAllreduce(comm, window, parts, dtype, reduction).Run();
}

}  // namespace hora
