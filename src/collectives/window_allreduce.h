// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The state of one rank's allreduce on a DeviceWindow
// (allreduce_device_window.h), shared by its two files:
// allreduce_device_window.cc (the chunk loop on one host's window) and
// allreduce_device_hosts.cc (the exchanges across hosts). Internal to them.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "collectives/allreduce_common.h"
#include "collectives/allreduce_device_window.h"
#include "collectives/allreduce_shared.h"
#include "collectives/shared_common.h"
#include "kernels/reduce.h"

namespace hora::window_internal {

// How long an allreduce across hosts that a rank of this host failed waits
// for this rank's transport to learn of a lost peer, to name it.
inline constexpr Duration kLostAcrossGrace = std::chrono::milliseconds(500);

// Chunks of at most this many bytes take the one-step path.
inline constexpr size_t kOneStepMaxBytes = DeviceWindow::kScratchBytes;

// One rank's allreduce on the window: the chunk loop's state.
class WindowAllreduce {
 public:
  WindowAllreduce(Comm& comm, DeviceWindow& w, std::span<const AllreducePart> parts, DataType dtype,
                  const Reduction& reduction, const AcrossHosts* across)
      : comm_(comm),
        across_(across),
        w_(w),
        dev_(w.device()),
        parts_(parts),
        dtype_(dtype),
        reduction_(reduction),
        esize_(DataTypeSize(dtype)),
        n_(comm.size()),
        world_(across != nullptr ? across->world : n_),
        op_(ReducingOp(reduction.op)),
        finalize_(kernels::NeedsFinalize(dtype, reduction.op, world_, reduction.postscale_factor)),
        srcs_(static_cast<size_t>(n_)) {}

  Status Run();

 private:
  // Queues the chunk's copy into this rank's half `half` (and its prescale)
  // and waits for it.
  Status CopyIn(size_t half, size_t begin, size_t count);
  // The one-step path: every window's chunk folded into the outputs. It and
  // FoldPiece keep going on a failure: their device's error goes to mine_.
  void FoldAll(size_t half, size_t begin, size_t count);
  // The two-step path's first half: piece `rank` folded into its window
  // (and allreduced across hosts, when the job spans them).
  void FoldPiece(size_t half, size_t count);
  // ... and its second: every piece copied out of its owner's window.
  Status CopyPiecesOut(size_t half, size_t begin, size_t count);
  // Where piece k of a chunk of `count` elements starts, and its length.
  void Piece(int k, size_t count, size_t* offset, size_t* len) const;
  // Across hosts (allreduce_device_hosts.cc): `count` elements at `data` (device memory; unused
  // once this rank stopped) allreduced with this rank's counterparts through host memory, back at
  // `data` when this rank still works. A failed exchange is this rank's failure (mine_), and the
  // last it makes.
  void Across(std::byte* data, size_t count);
  // `count` elements at `data` finalized for the job's ranks, if needed.
  Status FinalizeAt(std::byte* data, size_t count);
  // Across hosts, at the end: every rank tells its counterparts whether
  // what it sent them was its host's, then its host's ranks what it heard.
  Status Agree(size_t total);
  // A flagged step; after it, `verdict_` says which ranks failed. A rank
  // that failed first waits (bounded) for what its device was given, so
  // that its step still proves its device is done with the half.
  // `heard`: what this rank heard of other hosts (Agree), which it says
  // when its own state is fine.
  Status Step(bool first, size_t total, RankState heard = RankState::kOk);
  // The collective's end when a rank failed: this rank's own error, or one
  // naming the failed ranks.
  Status Ended() const;
  // Across hosts, where a rank of this host failed: " (why)" when this
  // rank's transport knows of a lost peer within kLostAcrossGrace, else "".
  std::string LostAcross() const;

  // Whether this rank still works on its GPU: its device has not failed
  // and no step said a rank of its host did.
  bool working() const { return mine_.ok() && !halted_; }

  Comm& comm_;
  const AcrossHosts* const across_;
  DeviceWindow& w_;
  gpu::Device& dev_;
  const SharedParts parts_;
  const DataType dtype_;
  const Reduction reduction_;
  const size_t esize_;
  const int n_;
  const int world_;  // the job's ranks: n_, or every host's
  const ReduceOp op_;
  const bool finalize_;
  Status mine_;           // this rank's device failure, once there is one
  StepVerdict verdict_;   // what the last step said
  bool drained_ = false;  // (after a failure) this rank's device did all it was given
  bool stuck_ = false;    // a wait for this rank's device failed: it may still be at work
  // Across hosts: a step said a rank of this host failed (the same on all of
  // them), so they make no more steps and leave their GPUs alone, but go on
  // with their exchanges across hosts; `halted_by_` names that rank.
  bool halted_ = false;
  int halted_by_ = -1;
  bool halted_stuck_ = false;
  // Across hosts: what this rank sent once was not its host's true share.
  bool sent_bad_ = false;
  Status exchange_;  // the first failed exchange across hosts
  // Waits for the device (w_.WaitDevice); a failure marks it stuck.
  Status Wait(const char* what) {
    Status st = w_.WaitDevice(what);
    stuck_ = stuck_ || !st.ok();
    return st;
  }
  std::vector<const void*> srcs_;
  std::vector<gpu::CopyPart> copies_;
};

}  // namespace hora::window_internal
