// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/bitwise_and.h"

#include <cstring>
#include <optional>

#include "collectives/allreduce_shared.h"
#include "collectives/recursive_doubling.h"
#include "collectives/shared_common.h"

namespace hora {

namespace {

// What a rank carries (AndShared): its call word (dtype, bytes), the
// reduction's op and its pre- and postscale factors; zeros for nothing.
constexpr size_t kCarriedWords = 4;

// On the control Comm's shared window: every rank writes its vector into its
// region (and the description of the data it carries; the data goes in the
// data Comm's window), one step, then ANDs all n regions in place (each
// reads n small vectors: cheaper than a second step). True if every rank
// carried the same allreduce and the same words (status word aside).
Result<bool> AndShared(Comm& comm, std::span<uint64_t> words, Comm* data_comm,
                       const CarriedAllreduce* carried) {
  CollectiveScope scope(comm, "engine negotiation",
                        carried ? "bit-vector AND with an allreduce, shared memory"
                                : "bit-vector AND, shared memory");
  SharedWindow& w = *comm.window();
  const size_t half = w.NextHalf() * (w.bytes() / 2);
  std::byte* mine = w.local() + half;
  if (!words.empty()) std::memcpy(mine, words.data(), words.size_bytes());
  uint64_t about[kCarriedWords] = {};
  std::optional<SharedParts> parts;
  ChunkPiece own;  // (read from the inputs in place: SharedOwnPiece)
  SharedWindow* data = carried != nullptr ? data_comm->window() : nullptr;
  // The half the data Comm's next collective uses. No rank reads it now:
  // what was last published there was read before its readers' next step,
  // on either window, and this rank has returned from a later step that
  // every rank made (shared_window.h's reuse rule). So it may be written
  // whether or not the allreduce below runs.
  const size_t data_half = data != nullptr ? (data->halves() & 1u) * (data->bytes() / 2) : 0;
  if (carried != nullptr) {
    parts.emplace(carried->parts);
    const Reduction& r = carried->reduction;
    about[0] = SharedWord(SharedCall::kAllreduce, carried->dtype,
                          parts->total() * DataTypeSize(carried->dtype));
    about[1] = static_cast<uint64_t>(r.op);
    std::memcpy(&about[2], &r.prescale_factor, 8);
    std::memcpy(&about[3], &r.postscale_factor, 8);
    own = SharedOwnPiece(*data_comm, carried->dtype, r, parts->total());
    SharedCopyIn(*parts, carried->dtype, r, 0, parts->total(), data->local() + data_half, own);
  }
  std::memcpy(mine + words.size_bytes(), about, sizeof about);
  HORA_RETURN_IF_ERROR(
      SharedFirstStep(comm, SharedCall::kBitwiseAnd, DataType::kInt64, words.size_bytes()));
  // Compared before the AND below changes `words`.
  bool all_carry = carried != nullptr;
  const size_t compared = words.empty() ? 0 : words.size_bytes() - 8;
  for (int k = 0; k < comm.size() && all_carry; ++k) {
    const std::byte* other = w.region(k) + half;
    all_carry = std::memcmp(other, mine, compared) == 0 &&
                std::memcmp(other + words.size_bytes(), about, sizeof about) == 0;
  }
  for (int k = 0; k < comm.size(); ++k) {
    if (k == comm.rank()) continue;
    const auto* other = reinterpret_cast<const uint64_t*>(w.region(k) + half);
    for (size_t i = 0; i < words.size(); ++i) words[i] &= other[i];
  }
  if (!all_carry) return false;
  data->NextHalf();  // (data_half: every rank's data Comm goes on alike)
  HORA_RETURN_IF_ERROR(SharedReduceChunk(*data_comm, *parts, carried->dtype, carried->reduction,
                                         data_half, 0, parts->total(), own));
  return true;
}

}  // namespace

bool BitwiseAndOnWindow(const Comm& comm, size_t words) {
  // The vector and a description of what a rank carries, in half the window.
  return SharedUsable(comm) && (words + kCarriedWords) * 8 <= comm.window()->bytes() / 2;
}

size_t CarriableBytes(const Comm& control, const Comm& data, size_t words) {
  if (!BitwiseAndOnWindow(control, words) || !SharedUsable(data) || &data == &control) return 0;
  return data.window()->bytes() / 2;
}

Result<bool> AllreduceBitwiseAndCarrying(Comm& control, std::span<uint64_t> words, Comm* data,
                                         const CarriedAllreduce* carried) {
  if (!BitwiseAndOnWindow(control, words.size())) {
    HORA_RETURN_IF_ERROR(AllreduceBitwiseAnd(control, words));
    return false;
  }
  size_t bytes = 0;
  if (carried != nullptr) {
    for (const AllreducePart& p : carried->parts) bytes += p.count;
    bytes *= DataTypeSize(carried->dtype);
  }
  // Too large, or no window to carry it in: carried by no rank (the AND's
  // step goes on alike on every rank).
  const bool fits = carried != nullptr && data != nullptr &&
                    bytes <= CarriableBytes(control, *data, words.size());
  return AndShared(control, words, data, fits ? carried : nullptr);
}

Status AllreduceBitwiseAnd(Comm& comm, std::span<uint64_t> words) {
  if (BitwiseAndOnWindow(comm, words.size())) {
    return AndShared(comm, words, nullptr, nullptr).status();
  }
  CollectiveScope scope(comm, "engine negotiation", "bit-vector AND");
  std::vector<uint64_t> tmp(words.size());
  return RecursiveDoubling(
      comm, words.data(), words.size_bytes(), tmp.data(),
      [&](const void*) {
        for (size_t i = 0; i < words.size(); ++i) words[i] &= tmp[i];
      },
      [] {});
}

}  // namespace hora
