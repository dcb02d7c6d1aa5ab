// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/shared_common.h"

#include <string>

namespace hora {
namespace {

constexpr int kCallShift = 56;
constexpr int kTypeShift = 48;
constexpr int kHalfShift = 47;  // which half of the window the call began on
constexpr uint64_t kBytesMask = (uint64_t{1} << kHalfShift) - 1;

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
  }
  return "an unknown call (" + std::to_string(word) + ")";
}

}  // namespace

uint64_t SharedWord(SharedCall call, DataType dtype, uint64_t bytes) {
  return (static_cast<uint64_t>(call) << kCallShift) |
         (static_cast<uint64_t>(static_cast<uint8_t>(dtype)) << kTypeShift) | (bytes & kBytesMask);
}

Status SharedFirstStep(Comm& comm, SharedCall call, DataType dtype, uint64_t bytes) {
  const SharedWindow& w = *comm.window();
  // The half the call began on goes along: ranks whose halves drifted apart
  // (a bug) fail here instead of reading each other's stale data.
  const uint64_t mine = SharedWord(call, dtype, bytes) | ((w.halves() - 1) & 1) << kHalfShift;
  HORA_RETURN_IF_ERROR(comm.WindowStep(mine));
  bool same = true;
  for (int k = 0; k < w.size(); ++k) same = same && w.word(k) == mine;
  if (same) return Status::Ok();
  std::string calls;
  for (int k = 0; k < w.size(); ++k) {
    calls += (k ? "; rank " : "rank ") + std::to_string(k) + ": " + Describe(w.word(k));
  }
  return MismatchError(comm.Where() +
                       ": the ranks called different collectives or sizes: " + calls);
}

}  // namespace hora
