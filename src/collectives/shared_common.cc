// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/shared_common.h"

#include <string>

namespace hora {
namespace {

constexpr int kCallShift = 56;
constexpr int kTypeShift = 48;
constexpr int kHalfShift = 47;   // which half of the window the call began on
constexpr int kStateShift = 45;  // two bits: a RankState (the flagged steps)
constexpr uint64_t kState = uint64_t{3} << kStateShift;
constexpr uint64_t kBytesMask = (uint64_t{1} << kStateShift) - 1;

// "8 float32 (32 bytes)": a count of elements where the bytes are whole ones.
std::string Elements(uint64_t bytes, DataType dtype) {
  const uint64_t size = DataTypeSize(dtype);
  if (size == 0 || bytes % size != 0)
    return std::to_string(bytes) + " bytes of " + DataTypeName(dtype);
  return std::to_string(bytes / size) + " " + DataTypeName(dtype) + " (" + std::to_string(bytes) +
         " bytes)";
}

// A rank's call in the user's terms; the window's half (which of the
// window's two halves the call began on) only where `show_half`: the ranks'
// halves differ, so one is a call behind.
std::string Describe(uint64_t word, bool show_half) {
  const auto call = static_cast<SharedCall>(word >> kCallShift);
  const auto dtype = static_cast<DataType>((word >> kTypeShift) & 0xff);
  const uint64_t bytes = word & kBytesMask;
  const std::string half =
      show_half ? " (window half " + std::to_string(word >> kHalfShift & 1) + ")" : "";
  // (The splits travel as an 8-bit hash: equal splits, equal numbers.)
  const std::string pattern = std::to_string((word >> kTypeShift) & 0xff);
  switch (call) {
    case SharedCall::kAllreduce:
      return "allreduce of " + Elements(bytes, dtype) + half;
    case SharedCall::kBarrier:
      return "barrier" + half;
    case SharedCall::kBitwiseAnd:
      return "bit-vector AND of " + std::to_string(bytes) + " bytes" + half;
    case SharedCall::kDeviceWindow:
      return "GPU window setup or teardown (" + std::to_string(bytes) + " bytes)" + half;
    case SharedCall::kBroadcast:
      return "broadcast of " + std::to_string(bytes) + " bytes from rank " + pattern +
             " (mod 256)" + half;
    case SharedCall::kAllgather:
      return "allgather of " + std::to_string(bytes) + " bytes in all (rows per rank: pattern " +
             pattern + ")" + half;
    case SharedCall::kAlltoall:
      return "alltoall of " + std::to_string(bytes) + " bytes in all (splits: pattern " + pattern +
             ")" + half;
    case SharedCall::kReducescatter:
      return "reducescatter of " + Elements(bytes & ((uint64_t{1} << kSplitSizeBits) - 1), dtype) +
             " (elements per rank: pattern " + std::to_string(bytes >> kSplitSizeBits) + ")" + half;
    case SharedCall::kDeviceAllreduce:
      return "GPU allreduce of " + Elements(bytes, dtype) + half;
  }
  return "an unknown call (" + std::to_string(word) + ")";
}

uint64_t StateBits(RankState s) { return static_cast<uint64_t>(s) << kStateShift; }

// The ranks whose last step's word says they failed.
Status SharedFlagged(const Comm& comm, const SharedWindow& w, StepVerdict* out) {
  out->failed.clear();
  out->several = false;
  out->stuck = false;
  out->first = -1;
  int count = 0;
  for (int k = 0; k < w.size(); ++k) {
    const auto state = static_cast<RankState>((w.word(k) & kState) >> kStateShift);
    if (state == RankState::kOk) continue;
    out->stuck = out->stuck || state == RankState::kStuck;
    if (count == 0) out->first = comm.Number(k);
    out->failed += (count++ ? ", " : "") + std::to_string(comm.Number(k));
  }
  out->several = count > 1;
  if (count > 0) out->failed = (count > 1 ? "ranks " : "rank ") + out->failed;
  return Status::Ok();
}

}  // namespace

uint64_t SharedWord(SharedCall call, DataType dtype, uint64_t bytes) {
  return (static_cast<uint64_t>(call) << kCallShift) |
         (static_cast<uint64_t>(static_cast<uint8_t>(dtype)) << kTypeShift) | (bytes & kBytesMask);
}

uint8_t SplitsHash(std::span<const size_t> splits) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a over the splits' bytes
  for (size_t s : splits) {
    for (int i = 0; i < 8; ++i) {
      h ^= (static_cast<uint64_t>(s) >> (8 * i)) & 0xff;
      h *= 1099511628211ULL;
    }
  }
  return static_cast<uint8_t>(h ^ (h >> 8) ^ (h >> 16) ^ (h >> 24));
}

Status SharedFirstStep(Comm& comm, SharedCall call, DataType dtype, uint64_t bytes) {
  StepVerdict verdict;
  return SharedFirstStepFlagged(comm, call, dtype, bytes, RankState::kOk, &verdict);
}

Status SharedFirstStepFlagged(Comm& comm, SharedCall call, DataType dtype, uint64_t bytes,
                              RankState state, StepVerdict* verdict) {
  const SharedWindow& w = *comm.window();
  // The half the call began on goes along: ranks whose halves drifted apart
  // (a bug) fail here instead of reading each other's stale data.
  const uint64_t mine = SharedWord(call, dtype, bytes) | ((w.halves() - 1) & 1) << kHalfShift;
  HORA_RETURN_IF_ERROR(comm.WindowStep(mine | StateBits(state)));
  bool same = true;
  for (int k = 0; k < w.size(); ++k) same = same && (w.word(k) & ~kState) == mine;
  if (same) return SharedFlagged(comm, w, verdict);
  bool halves_differ = false;
  for (int k = 0; k < w.size(); ++k) {
    halves_differ = halves_differ || ((w.word(k) ^ mine) >> kHalfShift & 1) != 0;
  }
  std::string calls;
  for (int k = 0; k < w.size(); ++k) {
    calls += (k ? "; rank " : "rank ") + std::to_string(comm.Number(k)) + ": " +
             Describe(w.word(k) & ~kState, halves_differ);
  }
  return MismatchError(comm.Where() +
                       ": the ranks called different collectives or sizes: " + calls);
}

Status SharedFlaggedStep(Comm& comm, RankState state, StepVerdict* verdict) {
  HORA_RETURN_IF_ERROR(comm.WindowStep(StateBits(state)));
  return SharedFlagged(comm, *comm.window(), verdict);
}

}  // namespace hora
