// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// WindowAllreduce's exchanges across hosts (allreduce_device_window.h's
// AcrossHosts): a host's share through host memory, and the agreement at
// the end on whether every host's shares were true.
#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/hierarchy_cost.h"
#include "collectives/window_allreduce.h"

namespace hora::window_internal {

void WindowAllreduce::Across(std::byte* data, size_t count) {
  if (across_ == nullptr || count == 0) return;
  // In pieces of the staging chunk (HORA_STAGING_CHUNK_BYTES, the same on
  // every rank; 0: whole), pipelined: piece j+1 goes to host memory while
  // piece j is exchanged, and piece j comes back while j+1 is.
  // (At most kMostPieces: a tiny setting makes larger pieces, as staging's
  // chunks do.)
  constexpr size_t kMostPieces = 1024;
  const size_t step = std::max({across_->chunk_bytes == 0 ? count : across_->chunk_bytes / esize_,
                                size_t{1}, (count + kMostPieces - 1) / kMostPieces});
  const size_t pieces = (count + step - 1) / step;
  auto* pinned = static_cast<std::byte*>(across_->pinned);
  const auto at = [&](size_t j) { return j * step * esize_; };
  const auto len = [&](size_t j) { return std::min(step, count - j * step); };
  const auto out = [&](size_t j) {  // piece j to host memory, then its event
    if (!working()) return;
    mine_ = dev_.Copy(pinned + at(j), data + at(j), len(j) * esize_, gpu::CopyKind::kDeviceToHost,
                      w_.stream());
    if (mine_.ok()) mine_ = dev_.Record(across_->events[j % 2], w_.stream());
  };
  // Every rank of the host exchanges its piece at once, over the host's
  // link: the across model (one rank a host, n_ sharers) chooses. Pieces
  // have one length but the last.
  const CostModel model = AcrossHostsModel(*across_->selector, n_);
  const auto choose = [&](size_t elements) -> const AllreduceAlgorithm& {
    return across_->selector->ChooseAllreduce(across_->comm->size(), elements * esize_,
                                              /*shared=*/false, model);
  };
  const AllreduceAlgorithm& whole = choose(step);
  const AllreduceAlgorithm& last = choose(len(pieces - 1));
  out(0);
  if (pieces > 1) out(1);
  for (size_t j = 0; j < pieces; ++j) {
    if (working()) {
      mine_ = w_.WaitEvent(across_->events[j % 2], "copying to host memory for the other hosts");
      stuck_ = stuck_ || !mine_.ok();
    }
    sent_bad_ = sent_bad_ || !working();
    if (exchange_.ok()) {  // (none on a failed Comm)
      AllreduceArgs args{pinned + at(j), pinned + at(j), len(j), dtype_, Reduction{op_, 1.0, 1.0}};
      exchange_ = (j + 1 < pieces ? whole : last).run(*across_->comm, args);
      // A failed exchange stops this rank's host at its next step, as a
      // failed device does, so that its ranks stay in step; its error ends
      // the collective.
      if (!exchange_.ok() && mine_.ok()) mine_ = exchange_;
    }
    if (working()) {
      mine_ = dev_.Copy(data + at(j), pinned + at(j), len(j) * esize_, gpu::CopyKind::kHostToDevice,
                        w_.stream());
    }
    if (j + 2 < pieces) out(j + 2);  // (its event was waited for above)
  }
}

std::string WindowAllreduce::LostAcross() const {
  // A rank of this host fails when one of another host is lost; this rank's
  // transport may learn of that loss a moment after the step said so.
  const TimePoint until = Clock::now() + kLostAcrossGrace;
  Status lost = across_->comm->transport().LostPeer();
  while (lost.ok() && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    lost = across_->comm->transport().LostPeer();
  }
  return lost.ok() ? "" : " (" + lost.message() + ")";
}

Status WindowAllreduce::Agree(size_t total) {
  // What this rank sent: its host's share (0), or not (1: a rank of its
  // host failed, or its own device did), or a device of its host may still
  // be at work on the windows (2: every host then gives them up). With the
  // rank that failed.
  if (!mine_.ok() && !halted_ && !drained_ && !stuck_) drained_ = Wait("after a failure").ok();
  int32_t mine[2] = {0, -1};
  if (halted_) {
    mine[0] = halted_stuck_ ? 2 : 1;
    mine[1] = halted_by_;
  } else if (stuck_ || sent_bad_ || !mine_.ok()) {
    // (Even a failure after its last exchange: every rank then fails this
    // allreduce, so that every rank stages the next ones alike.)
    mine[0] = stuck_ ? 2 : 1;
    mine[1] = comm_.Number(comm_.rank());
  }
  const int hosts = across_->comm->size();
  std::vector<int32_t> heard(2 * static_cast<size_t>(hosts), 0);
  std::vector<size_t> bytes(static_cast<size_t>(hosts), sizeof mine);
  if (exchange_.ok()) {
    exchange_ = AllgatherRing(*across_->comm, mine, heard.data(), bytes);
    if (!exchange_.ok() && mine_.ok()) mine_ = exchange_;
  }
  std::string others;
  int count = 0;
  bool stuck = false;
  for (int h = 0; h < hosts; ++h) {
    const int32_t state = heard[2 * static_cast<size_t>(h)];
    const int32_t rank = heard[2 * static_cast<size_t>(h) + 1];
    if (state == 0 || h == across_->comm->rank()) continue;
    stuck = stuck || state == 2;
    others += (count++ ? ", " : "") + std::to_string(rank);
  }
  // This host's ranks heard from different hosts: one more step, and every
  // one of them fails if any heard of a failure, or failed after its step
  // (and gives up the windows, as every host then does, if any heard or
  // found that a device may still be at work).
  const StepVerdict halting = verdict_;
  HORA_RETURN_IF_ERROR(Step(false, total,
                            stuck       ? RankState::kStuck
                            : count > 0 ? RankState::kFailed
                                        : RankState::kOk));
  if (halted_) {
    const bool retired = verdict_.stuck;
    verdict_ = halting;
    verdict_.stuck = verdict_.stuck || retired;
    return Ended();
  }
  if (!mine_.ok()) return mine_;
  if (count > 0) {
    return AbortedError(comm_.Where() + ": " + (count > 1 ? "ranks " : "rank ") + others +
                        (count > 1 ? " of other hosts" : " of another host") +
                        " failed during this allreduce (on " +
                        (count > 1 ? "their GPUs" : "its GPU") +
                        ", or a rank of its host did), so it fails on every rank" +
                        (stuck ? " (and the GPU windows are given up: GPU allreduce is staged "
                                 "from now on)"
                               : ""));
  }
  if (!verdict_.failed.empty()) {
    return AbortedError(comm_.Where() + ": " + verdict_.failed + " of this host failed " +
                        "during this allreduce, or " + (verdict_.several ? "were" : "was") +
                        " told that a rank of another host did" + LostAcross() +
                        "; results may lack a rank's data, so it fails on every rank of this host" +
                        (verdict_.stuck ? " (and the GPU windows are given up: GPU allreduce is "
                                          "staged from now on)"
                                        : ""));
  }
  return Status::Ok();
}

}  // namespace hora::window_internal
