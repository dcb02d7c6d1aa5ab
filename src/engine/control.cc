// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "engine/control.h"

#include "collectives/algorithms.h"
#include "collectives/allreduce_common.h"
#include "collectives/allreduce_shared.h"
#include "collectives/shared_common.h"

#include <cstring>
#include <optional>

namespace hora {

namespace {

// What a rank carries (AllreduceAndShared): its call word (dtype, bytes),
// the reduction's op and its pre- and postscale factors; zeros for nothing.
constexpr size_t kCarriedWords = 4;

// On the control Comm's shared window: every rank writes its vector into its
// region (and the description of the data it carries; the data goes in the
// data Comm's window), one step, then ANDs all n regions in place (each
// reads n small vectors: cheaper than a second step). True if every rank
// carried the same allreduce and the same words (status word aside).
Result<bool> AllreduceAndShared(Comm& comm, std::span<uint64_t> words,
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
  SharedWindow* data = carried != nullptr ? carried->comm->window() : nullptr;
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
    SharedCopyIn(*parts, carried->dtype, r, 0, parts->total(), data->local() + data_half);
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
  HORA_RETURN_IF_ERROR(SharedReduceChunk(*carried->comm, *parts, carried->dtype, carried->reduction,
                                         data_half, 0, parts->total()));
  return true;
}

}  // namespace

bool AndOnWindow(const Comm& comm, size_t words) {
  // The vector and a description of what a rank carries, in half the window.
  return SharedUsable(comm) && (words + kCarriedWords) * 8 <= comm.window()->bytes() / 2;
}

size_t CarriableBytes(const Comm& control, const Comm& data, size_t words) {
  if (!AndOnWindow(control, words) || !SharedUsable(data) || &data == &control) return 0;
  return data.window()->bytes() / 2;
}

Result<bool> AllreduceAndCarrying(Comm& control, std::span<uint64_t> words,
                                  const CarriedAllreduce* carried) {
  if (!AndOnWindow(control, words.size())) {
    HORA_RETURN_IF_ERROR(AllreduceAnd(control, words));
    return false;
  }
  size_t bytes = 0;
  if (carried != nullptr) {
    for (const AllreducePart& p : carried->parts) bytes += p.count;
    bytes *= DataTypeSize(carried->dtype);
  }
  // Too large, or no window to carry it in: carried by no rank (the AND's
  // step goes on alike on every rank).
  const bool fits =
      carried != nullptr && bytes <= CarriableBytes(control, *carried->comm, words.size());
  return AllreduceAndShared(control, words, fits ? carried : nullptr);
}

Status AllreduceAnd(Comm& comm, std::span<uint64_t> words) {
  if (AndOnWindow(comm, words.size())) {
    return AllreduceAndShared(comm, words, nullptr).status();
  }
  CollectiveScope scope(comm, "engine negotiation", "bit-vector AND");
  const int n = comm.size();
  const size_t bytes = words.size_bytes();
  std::vector<uint64_t> tmp(words.size());
  auto fold_in = [&] {
    for (size_t i = 0; i < words.size(); ++i) words[i] &= tmp[i];
  };
  const PowerOfTwoFold fold(n, comm.rank());
  if (fold.FoldedAway()) {
    Request s = comm.Isend(fold.fold_partner, Comm::LocalTag(0, 0, 0), words.data(), bytes);
    Request r = comm.Irecv(fold.fold_partner, Comm::LocalTag(2, 0, 0), words.data(), bytes);
    HORA_RETURN_IF_ERROR(comm.Wait(s));
    return comm.Wait(r);
  }
  if (fold.fold_partner >= 0) {
    Request r = comm.Irecv(fold.fold_partner, Comm::LocalTag(0, 0, 0), tmp.data(), bytes);
    HORA_RETURN_IF_ERROR(comm.Wait(r));
    fold_in();
  }
  uint32_t round = 0;
  for (int mask = 1; mask < fold.p; mask <<= 1, ++round) {
    const int partner = fold.Real(fold.vrank ^ mask);
    Request r = comm.Irecv(partner, Comm::LocalTag(1, round, 0), tmp.data(), bytes);
    Request s = comm.Isend(partner, Comm::LocalTag(1, round, 0), words.data(), bytes);
    HORA_RETURN_IF_ERROR(comm.Wait(r));
    HORA_RETURN_IF_ERROR(comm.Wait(s));
    fold_in();
  }
  if (fold.fold_partner >= 0) {
    Request s = comm.Isend(fold.fold_partner, Comm::LocalTag(2, 0, 0), words.data(), bytes);
    return comm.Wait(s);
  }
  return Status::Ok();
}

Result<std::vector<std::vector<uint8_t>>> GatherBytes(Comm& comm, int root,
                                                      const std::vector<uint8_t>& mine) {
  CollectiveScope scope(comm, "engine negotiation", "gather to the coordinator");
  const int n = comm.size();
  std::vector<std::vector<uint8_t>> all;
  if (comm.rank() != root) {
    const uint64_t size = mine.size();
    Request s1 = comm.Isend(root, Comm::LocalTag(0, 0, 0), &size, sizeof size);
    Request s2 = comm.Isend(root, Comm::LocalTag(1, 0, 0), mine.data(), mine.size());
    HORA_RETURN_IF_ERROR(comm.Wait(s1));
    HORA_RETURN_IF_ERROR(comm.Wait(s2));
    return all;
  }
  all.resize(static_cast<size_t>(n));
  std::vector<uint64_t> sizes(static_cast<size_t>(n), 0);
  std::vector<Request> reqs;
  for (int p = 0; p < n; ++p) {
    if (p != root) reqs.push_back(comm.Irecv(p, Comm::LocalTag(0, 0, 0), &sizes[p], 8));
  }
  for (const Request& r : reqs) HORA_RETURN_IF_ERROR(comm.Wait(r));
  reqs.clear();
  for (int p = 0; p < n; ++p) {
    if (p == root) {
      all[p] = mine;
      continue;
    }
    if (sizes[p] > (uint64_t{1} << 32)) {
      return InvalidArgument("rank " + std::to_string(root) + ": engine negotiation: rank " +
                             std::to_string(p) + " announced " + std::to_string(sizes[p]) +
                             " bytes of requests");
    }
    all[p].resize(sizes[p]);
    reqs.push_back(comm.Irecv(p, Comm::LocalTag(1, 0, 0), all[p].data(), all[p].size()));
  }
  for (const Request& r : reqs) HORA_RETURN_IF_ERROR(comm.Wait(r));
  return all;
}

Status BroadcastBytes(Comm& comm, int root, std::vector<uint8_t>& data) {
  uint64_t size = data.size();
  HORA_RETURN_IF_ERROR(BroadcastBinomial(comm, &size, sizeof size, root));
  if (size > (uint64_t{1} << 32)) {
    return InvalidArgument("rank " + std::to_string(comm.rank()) +
                           ": engine negotiation: the coordinator announced " +
                           std::to_string(size) + " bytes of responses");
  }
  data.resize(size);
  return BroadcastBinomial(comm, data.data(), data.size(), root);
}

}  // namespace hora
