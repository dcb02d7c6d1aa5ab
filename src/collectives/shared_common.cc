// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/shared_common.h"

#include <string>

namespace hora {
namespace {

constexpr int kCallShift = 56;
constexpr int kTypeShift = 48;
constexpr int kHalfShift = 47;    // which half of the window the call began on
constexpr int kFailedShift = 46;  // the rank failed on its own (the flagged steps)
constexpr uint64_t kFailed = uint64_t{1} << kFailedShift;
constexpr uint64_t kBytesMask = kFailed - 1;

std::string Describe(uint64_t word) {
  const auto call = static_cast<SharedCall>(word >> kCallShift);
  const auto dtype = static_cast<DataType>((word >> kTypeShift) & 0xff);
  const uint64_t bytes = word & kBytesMask;
  const std::string half = " (window half " + std::to_string(word >> kHalfShift & 1) + ")";
  switch (call) {
    case SharedCall::kAllreduce:
      return "allreduce of " + std::to_string(bytes) + " bytes of " + DataTypeName(dtype) + half;
    case SharedCall::kBarrier:
      return "barrier" + half;
    case SharedCall::kBitwiseAnd:
      return "bit-vector AND of " + std::to_string(bytes) + " bytes" + half;
    case SharedCall::kDeviceWindow:
      return "GPU window setup or teardown (" + std::to_string(bytes) + " bytes)" + half;
    case SharedCall::kDeviceAllreduce:
      return "GPU allreduce of " + std::to_string(bytes) + " bytes of " + DataTypeName(dtype) +
             half;
  }
  return "an unknown call (" + std::to_string(word) + ")";
}

// The ranks whose last step's word has the failed bit.
Status SharedFlagged(const SharedWindow& w, std::string* failed_ranks) {
  failed_ranks->clear();
  int count = 0;
  for (int k = 0; k < w.size(); ++k) {
    if ((w.word(k) & kFailed) == 0) continue;
    *failed_ranks += (count++ ? ", " : "") + std::to_string(k);
  }
  if (count > 0) *failed_ranks = (count > 1 ? "ranks " : "rank ") + *failed_ranks;
  return Status::Ok();
}

}  // namespace

uint64_t SharedWord(SharedCall call, DataType dtype, uint64_t bytes) {
  return (static_cast<uint64_t>(call) << kCallShift) |
         (static_cast<uint64_t>(static_cast<uint8_t>(dtype)) << kTypeShift) | (bytes & kBytesMask);
}

Status SharedFirstStep(Comm& comm, SharedCall call, DataType dtype, uint64_t bytes) {
  std::string failed;
  return SharedFirstStepFlagged(comm, call, dtype, bytes, false, &failed);
}

Status SharedFirstStepFlagged(Comm& comm, SharedCall call, DataType dtype, uint64_t bytes,
                              bool failed, std::string* failed_ranks) {
  const SharedWindow& w = *comm.window();
  // The half the call began on goes along: ranks whose halves drifted apart
  // (a bug) fail here instead of reading each other's stale data.
  const uint64_t mine = SharedWord(call, dtype, bytes) | ((w.halves() - 1) & 1) << kHalfShift;
  HORA_RETURN_IF_ERROR(comm.WindowStep(mine | (failed ? kFailed : 0)));
  bool same = true;
  for (int k = 0; k < w.size(); ++k) same = same && (w.word(k) & ~kFailed) == mine;
  if (same) return SharedFlagged(w, failed_ranks);
  std::string calls;
  for (int k = 0; k < w.size(); ++k) {
    calls += (k ? "; rank " : "rank ") + std::to_string(k) + ": " + Describe(w.word(k) & ~kFailed);
  }
  return MismatchError(comm.Where() +
                       ": the ranks called different collectives or sizes: " + calls);
}

Status SharedFlaggedStep(Comm& comm, bool failed, std::string* failed_ranks) {
  HORA_RETURN_IF_ERROR(comm.WindowStep(failed ? kFailed : 0));
  return SharedFlagged(*comm.window(), failed_ranks);
}

}  // namespace hora
