// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "backends/hora_backend.h"

#include <cstdint>
#include <memory>
#include <string>

#include "backends/host_tiers.h"
#include "collectives/bitwise_and.h"
#include "collectives/shared_common.h"
#include "common/logging.h"

namespace hora {
namespace {

class HoraBackend final : public CollectiveBackend {
 public:
  HoraBackend(Comm& comm, Selector selector, bool hierarchical, const Logger* logger)
      : comm_(comm), selector_(std::move(selector)), hierarchical_(hierarchical), logger_(logger) {}

  const char* name() const override { return "hora"; }

  Status Allreduce(const AllreduceArgs& args) override {
    if (args.reduction.op == ReduceOp::kAdasum) return AllreduceAdasum(comm_, args);
    HORA_ASSIGN_OR_RETURN(const HostTiers* tiers, Tiers());
    if (tiers != nullptr)
      return AllreduceHierarchical(*tiers->host, *tiers->across, selector_, args);
    return Choose(args.count * DataTypeSize(args.dtype)).run(comm_, args);
  }

  Status AllreduceParts(std::span<const AllreducePart> parts, DataType dtype,
                        const Reduction& reduction, std::vector<std::byte>& fusion) override {
    size_t count = 0;
    for (const AllreducePart& p : parts) count += p.count;
    HORA_ASSIGN_OR_RETURN(const HostTiers* tiers, Tiers());
    if (reduction.op != ReduceOp::kAdasum && tiers == nullptr) {
      const AllreduceAlgorithm& a = Choose(count * DataTypeSize(dtype));
      if (a.run_parts != nullptr) return a.run_parts(comm_, parts, dtype, reduction);
    }
    return CollectiveBackend::AllreduceParts(parts, dtype, reduction, fusion);
  }

  // The carried allreduce: its data in this backend's shared window, where
  // an allreduce of that size would run on its own.
  bool CanCarry(const Comm& control, size_t words, size_t bytes) override {
    return Choose(bytes).needs == Needs::kSharedWindow &&
           bytes <= CarriableBytes(control, comm_, words);
  }

  Result<bool> AndCarrying(Comm& control, std::span<uint64_t> words,
                           const CarriedAllreduce* carried) override {
    return AllreduceBitwiseAndCarrying(control, words, &comm_, carried);
  }

  Status Allgatherv(const void* in, void* out, std::span<const size_t> bytes_per_rank) override {
    return AllgatherRing(comm_, in, out, bytes_per_rank);
  }

  Status Broadcast(void* data, size_t bytes, int root) override {
    return selector_.ChooseBroadcast(comm_.size(), bytes).run(comm_, data, bytes, root);
  }

  Status Reducescatter(const void* in, void* out, std::span<const size_t> counts, DataType dtype,
                       const Reduction& reduction) override {
    return ReducescatterRing(comm_, in, out, counts, dtype, reduction);
  }

  Status Alltoallv(const void* in, std::span<const size_t> send_bytes, void* out,
                   std::span<const size_t> recv_bytes) override {
    return AlltoallPairwise(comm_, in, send_bytes, out, recv_bytes);
  }

  Status Barrier() override {
    return SharedUsable(comm_) ? BarrierShared(comm_) : BarrierDissemination(comm_);
  }

  Status Retune(std::string_view allreduce_algo, bool hierarchical) override {
    HORA_ASSIGN_OR_RETURN(Selector s, selector_.WithAllreduce(allreduce_algo));
    selector_ = std::move(s);  // (the host tiers point to it: same object)
    last_allreduce_bytes_ = SIZE_MAX;
    hierarchical_ = hierarchical;
    return Status::Ok();
  }

 private:
  // The host tiers hierarchical allreduce runs on: null where it is off or
  // the job has none. Found at the first allreduce (a collective on comm_:
  // every rank's first allreduce is the same call).
  Result<const HostTiers*> Tiers() {
    if (!hierarchical_) return static_cast<const HostTiers*>(nullptr);
    if (!tiers_tried_) {
      tiers_tried_ = true;
      std::string why_not;
      HORA_ASSIGN_OR_RETURN(tier_comms_, HostTierComms::Find(comm_, &selector_, &why_not,
                                                             kHostAllreduceTierContext, false));
      // Asked for and not given: say why, once, from the first rank (every
      // rank finds the same).
      if (!why_not.empty() && logger_ != nullptr && comm_.rank() == 0)
        logger_->Warning(
            "hierarchical allreduce is on (HORA_HIERARCHICAL_ALLREDUCE) but "
            "allreduces run flat: " +
            why_not);
    }
    return tier_comms_ ? &tier_comms_->tiers() : nullptr;
  }

  const AllreduceAlgorithm& Choose(size_t bytes) {
    const bool shared = SharedUsable(comm_);
    if (bytes != last_allreduce_bytes_ || shared != last_shared_) {
      // Training repeats sizes: skip the cost model.
      last_allreduce_ = &selector_.ChooseAllreduce(comm_.size(), bytes, shared);
      last_allreduce_bytes_ = bytes;
      last_shared_ = shared;
    }
    return *last_allreduce_;
  }

  Comm& comm_;
  Selector selector_;  // (autotuning replaces these two)
  bool hierarchical_;
  const Logger* const logger_;
  bool tiers_tried_ = false;
  std::unique_ptr<HostTierComms> tier_comms_;
  size_t last_allreduce_bytes_ = SIZE_MAX;
  const AllreduceAlgorithm* last_allreduce_ = nullptr;
  bool last_shared_ = false;
};

}  // namespace

std::unique_ptr<CollectiveBackend> CreateHoraBackend(Comm& comm, Selector selector,
                                                     bool hierarchical, const Logger* logger) {
  return std::make_unique<HoraBackend>(comm, std::move(selector), hierarchical, logger);
}

}  // namespace hora
