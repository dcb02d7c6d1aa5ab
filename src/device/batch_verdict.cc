// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "device/batch_verdict.h"

#include <cstring>
#include <string>

namespace hora {
namespace {

bool Floating(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat32 ||
         t == DataType::kFloat64;
}

// One element of `t` at `at`: 1 (`one`) or 0.
void Store(DataType t, bool one, std::byte* at) {
  const size_t esize = DataTypeSize(t);
  std::memset(at, 0, esize);  // (0 in every type)
  if (!one) return;
  switch (t) {
    case DataType::kFloat16: {
      const uint16_t bits = 0x3C00;
      std::memcpy(at, &bits, 2);
      return;
    }
    case DataType::kBFloat16: {
      const uint16_t bits = 0x3F80;
      std::memcpy(at, &bits, 2);
      return;
    }
    case DataType::kFloat32: {
      const float v = 1.0f;
      std::memcpy(at, &v, 4);
      return;
    }
    case DataType::kFloat64: {
      const double v = 1.0;
      std::memcpy(at, &v, 8);
      return;
    }
    default: {  // integers and bool: 1 in the low byte (little-endian)
      const uint64_t v = 1;
      std::memcpy(at, &v, esize);
      return;
    }
  }
}

// Whether the element of `t` at `at` is nonzero (-0.0 is zero).
bool Nonzero(DataType t, const std::byte* at) {
  const size_t esize = DataTypeSize(t);
  uint64_t bits = 0;
  std::memcpy(&bits, at, esize);
  if (Floating(t)) bits &= ~(uint64_t{1} << (esize * 8 - 1));  // the sign
  return bits != 0;
}

// Whether a failed rank writes 0 in its slot and every other slot is 1
// (min, product), rather than 1 in its slot and 0 elsewhere.
bool FailedIsZero(ReduceOp op) { return op == ReduceOp::kMin || op == ReduceOp::kProduct; }

}  // namespace

BatchVerdict Judge(const RequestMeta& m, int rank, std::span<const BatchPart> parts,
                   bool before_call) {
  BatchVerdict v;
  const int size = static_cast<int>(parts.size());
  std::string failed;
  int count = 0;
  bool gpu = false;  // (a rank's device failed, not only a communicator)
  for (int r = 0; r < size; ++r) {
    const BatchPart given = parts[static_cast<size_t>(r)];
    if (given == BatchPart::kLeftNccl) v.left_nccl = true;
    if (given == BatchPart::kWhole || r == rank) continue;  // (its own error says it)
    if (!before_call && m.op == OpType::kBroadcast && r != m.root) continue;
    if (given != BatchPart::kLeftNccl) gpu = true;
    failed += (failed.empty() ? "" : ", ") + std::to_string(r);
    ++count;
  }
  if (count == 0) return v;
  const bool several = count > 1;
  const std::string op = OpTypeName(m.op);
  // (Before NCCL's calls a rank cannot make them where its GPU failed, or
  // where its turn to make them did not come: nccl_order.h.)
  const std::string says = several ? "their errors say" : "its error says";
  const std::string why = before_call && gpu
                              ? " (" + says + " why)"
                              : std::string(" (") +
                                    (gpu ? (several ? "their GPUs failed" : "its GPU failed")
                                         : (several ? "their NCCL communicators were aborted"
                                                    : "its NCCL communicator was aborted")) +
                                    "; " + says + " how)";
  if (before_call) {
    const std::string who = std::string(several ? "ranks " : "rank ") + failed;
    v.named = AbortedError(who + " could not take part in this " + op + why +
                           ", so no rank made it through NCCL; it fails" + " on every rank" +
                           (v.left_nccl ? " (every rank's NCCL communicator is made anew at its "
                                          "next NCCL batch)"
                                        : ""));
    return v;
  }
  const std::string who = std::string(m.op == OpType::kBroadcast ? "root rank "
                                      : several                  ? "ranks "
                                                                 : "rank ") +
                          failed;
  v.named =
      AbortedError(who + (several ? " could not give their data" : " could not give its data") +
                   " to this " + op + why + "; results without " + (several ? "their" : "its") +
                   " data would be wrong, so it fails on every rank");
  return v;
}

BatchVerdict AgreeOnBatch(CollectiveBackend& data, const RequestMeta& m, int rank, int size,
                          BatchPart mine, std::vector<uint8_t>& scratch, bool before_call) {
  BatchVerdict v;
  if (size < 2) return v;
  scratch.assign(static_cast<size_t>(size), 0);
  scratch[static_cast<size_t>(rank)] = static_cast<uint8_t>(mine);
  AllreduceArgs args;
  args.in = scratch.data();
  args.out = scratch.data();
  args.count = scratch.size();
  args.dtype = DataType::kUInt8;
  args.reduction.op = ReduceOp::kMax;
  v.ran = data.Allreduce(args);
  if (!v.ran.ok()) {
    v.ran = v.ran.WithContext("telling the ranks what each gave this batch");
    return v;
  }
  std::vector<BatchPart> parts(scratch.size());
  for (size_t r = 0; r < parts.size(); ++r) parts[r] = static_cast<BatchPart>(scratch[r]);
  BatchVerdict judged = Judge(m, rank, parts, before_call);
  judged.ran = v.ran;
  return judged;
}

size_t TrailerBytes(const RequestMeta& m, int size) {
  if (size < 2) return 0;
  if (m.op == OpType::kBroadcast) return 1;
  if (m.op != OpType::kAllreduce) return 0;
  const Reduction& r = m.reduction;
  if (r.prescale_factor != 1.0 || r.postscale_factor != 1.0) return 0;
  switch (r.op) {
    case ReduceOp::kSum:
    case ReduceOp::kMin:
    case ReduceOp::kMax:
    case ReduceOp::kProduct:
      break;
    case ReduceOp::kAverage:  // (1/size stays nonzero; an integer's would not)
      if (!Floating(m.dtype)) return 0;
      break;
    default:
      return 0;
  }
  return static_cast<size_t>(size) * DataTypeSize(m.dtype);
}

void PutTrailer(const RequestMeta& m, int rank, int size, BatchPart mine, std::byte* at) {
  const bool failed = mine != BatchPart::kWhole;
  if (m.op == OpType::kBroadcast) {
    *at = std::byte{static_cast<uint8_t>(failed ? 1 : 0)};
    return;
  }
  const size_t esize = DataTypeSize(m.dtype);
  const bool zero_fails = FailedIsZero(m.reduction.op);
  for (int r = 0; r < size; ++r) {
    const bool flagged = r == rank && failed;
    Store(m.dtype, zero_fails ? !flagged : flagged, at + static_cast<size_t>(r) * esize);
  }
}

BatchVerdict ReadTrailer(const RequestMeta& m, int rank, int size, const std::byte* at) {
  std::vector<BatchPart> parts(static_cast<size_t>(size), BatchPart::kWhole);
  if (m.op == OpType::kBroadcast) {
    if (*at != std::byte{0}) parts[static_cast<size_t>(m.root)] = BatchPart::kPlaceholders;
    return Judge(m, rank, parts, false);
  }
  const size_t esize = DataTypeSize(m.dtype);
  const bool zero_fails = FailedIsZero(m.reduction.op);
  for (int r = 0; r < size; ++r) {
    const bool nonzero = Nonzero(m.dtype, at + static_cast<size_t>(r) * esize);
    if (nonzero != zero_fails) parts[static_cast<size_t>(r)] = BatchPart::kPlaceholders;
  }
  return Judge(m, rank, parts, false);
}

}  // namespace hora
