// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "backends/hora_backend.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <unordered_map>

#include "backends/host_tiers.h"
#include "collectives/bitwise_and.h"
#include "collectives/hierarchy_cost.h"
#include "collectives/pair_in_place.h"
#include "collectives/shared_common.h"
#include "common/logging.h"

namespace hora {
namespace {

class HoraBackend final : public CollectiveBackend {
 public:
  HoraBackend(Comm& comm, Selector selector, Hierarchy hierarchy, bool job_spans_hosts,
              const Logger* logger)
      : comm_(comm),
        selector_(std::move(selector)),
        hierarchy_(hierarchy),
        job_spans_hosts_(job_spans_hosts),
        logger_(logger) {}

  const char* name() const override { return "hora"; }

  Status Allreduce(const AllreduceArgs& args) override {
    if (args.reduction.op == ReduceOp::kAdasum) return AllreduceAdasum(comm_, args);
    const size_t bytes = args.count * DataTypeSize(args.dtype);
    HORA_ASSIGN_OR_RETURN(const HostTiers* tiers, Tiers());
    const Choice& c = Choose(bytes, tiers);
    switch (c.route) {
      case Route::kEveryRank:
        return AllreduceHierarchical(*tiers->host, *tiers->across, *c.across, args);
      case Route::kOneRank:
        return AllreduceHierarchicalOne(*tiers->host, *tiers->across, *c.across, *c.broadcast,
                                        args);
      case Route::kFlat:
        break;
    }
    return c.flat->run(comm_, args);
  }

  Status AllreduceParts(std::span<const AllreducePart> parts, DataType dtype,
                        const Reduction& reduction, std::vector<std::byte>& fusion) override {
    size_t count = 0;
    for (const AllreducePart& p : parts) count += p.count;
    HORA_ASSIGN_OR_RETURN(const HostTiers* tiers, Tiers());
    if (reduction.op != ReduceOp::kAdasum) {
      const Choice& c = Choose(count * DataTypeSize(dtype), tiers);
      if (c.route == Route::kFlat && c.flat->run_parts != nullptr)
        return c.flat->run_parts(comm_, parts, dtype, reduction);
    }
    return CollectiveBackend::AllreduceParts(parts, dtype, reduction, fusion);
  }

  // The carried allreduce: its data in this backend's shared window, where
  // an allreduce of that size would run on its own.
  bool CanCarry(const Comm& control, size_t words, size_t bytes) override {
    // (Only a Comm on one host has a window, and only such a Comm has no tiers.)
    return SharedUsable(comm_) && Choose(bytes, nullptr).flat->needs == Needs::kSharedWindow &&
           bytes <= CarriableBytes(control, comm_, words);
  }

  Result<bool> AndCarrying(Comm& control, std::span<uint64_t> words,
                           const CarriedAllreduce* carried) override {
    return AllreduceBitwiseAndCarrying(control, words, &comm_, carried);
  }

  Status Allgatherv(const void* in, void* out, std::span<const size_t> bytes_per_rank) override {
    const auto r = static_cast<size_t>(comm_.rank());
    const bool pair = comm_.size() == 2 && bytes_per_rank.size() == 2 &&
                      PairInPlace(comm_, bytes_per_rank[r], bytes_per_rank[1 - r]);
    if (selector_.AllgatherOnWindow(SharedUsable(comm_), pair)) {
      return AllgatherShared(comm_, in, out, bytes_per_rank);
    }
    return AllgatherRing(comm_, in, out, bytes_per_rank);
  }

  Status Broadcast(void* data, size_t bytes, int root) override {
    return selector_.ChooseBroadcast(comm_.size(), bytes, SharedUsable(comm_))
        .run(comm_, data, bytes, root);
  }

  Status Reducescatter(const void* in, void* out, std::span<const size_t> counts, DataType dtype,
                       const Reduction& reduction) override {
    const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
    return selector_
        .ChooseReducescatter(comm_.size(), total * DataTypeSize(dtype), SharedUsable(comm_))
        .run(comm_, in, out, counts, dtype, reduction);
  }

  Status Alltoallv(const void* in, std::span<const size_t> send_bytes, void* out,
                   std::span<const size_t> recv_bytes) override {
    return AlltoallPairwise(comm_, in, send_bytes, out, recv_bytes);
  }

  bool WantsAlltoallSplits() const override { return SharedUsable(comm_); }

  Status AlltoallvAgreed(const void* in, std::span<const size_t> send_bytes, void* out,
                         std::span<const size_t> recv_bytes,
                         std::span<const size_t> all_bytes) override {
    const auto n = static_cast<size_t>(comm_.size());
    if (SharedUsable(comm_) && all_bytes.size() == n * n) {
      size_t largest = 0;
      for (size_t p = 0; p < n; ++p) {
        for (size_t q = 0; q < n; ++q) {
          if (p != q) largest = std::max(largest, all_bytes[p * n + q]);
        }
      }
      if (selector_.AlltoallOnWindow(comm_.size(), true, largest,
                                     AlltoallSharedSlotBytes(*comm_.window()))) {
        return AlltoallShared(comm_, in, out, all_bytes);
      }
    }
    return AlltoallPairwise(comm_, in, send_bytes, out, recv_bytes);
  }

  Status Barrier() override {
    return SharedUsable(comm_) ? BarrierShared(comm_) : BarrierDissemination(comm_);
  }

  Status Retune(std::string_view allreduce_algo, Hierarchy hierarchy) override {
    HORA_ASSIGN_OR_RETURN(Selector s, selector_.WithAllreduce(allreduce_algo));
    selector_ = std::move(s);  // (the host tiers point to it: same object)
    Forget();
    hierarchy_ = hierarchy;
    return Status::Ok();
  }

 private:
  // Flat, or hierarchical with every rank of a host crossing between hosts
  // (AllreduceHierarchical), or one (AllreduceHierarchicalOne).
  enum class Route : uint8_t { kFlat, kEveryRank, kOneRank };
  struct Choice {
    Route route = Route::kFlat;
    const AllreduceAlgorithm* flat = nullptr;       // where flat
    const AllreduceAlgorithm* across = nullptr;     // where hierarchical: across hosts
    const BroadcastAlgorithm* broadcast = nullptr;  // kOneRank: within the host
  };

  // The host tiers hierarchical allreduce runs on: null where it is off or
  // the job has none. Found at the first allreduce (a collective on comm_:
  // every rank's first allreduce is the same call) where the job spans
  // hosts (on one host no rank looks).
  Result<const HostTiers*> Tiers() {
    if (hierarchy_ == Hierarchy::kOff || !job_spans_hosts_)
      return static_cast<const HostTiers*>(nullptr);
    if (!tiers_tried_) {
      tiers_tried_ = true;
      std::string why_not;
      HORA_ASSIGN_OR_RETURN(tier_comms_, HostTierComms::Find(comm_, &selector_, &why_not,
                                                             kHostAllreduceTierContext, false));
      Forget();  // (a choice made before is not one with tiers)
      // Asked for and not given: say why, once, from the first rank (every
      // rank finds the same).
      if (!why_not.empty() && hierarchy_ != Hierarchy::kAuto && logger_ != nullptr &&
          comm_.rank() == 0)
        logger_->Warning(std::string("hierarchical allreduce is on (HORA_HIERARCHICAL_ALLREDUCE=") +
                         HierarchyName(hierarchy_) + ") but allreduces run flat: " + why_not);
    }
    return tier_comms_ ? &tier_comms_->tiers() : nullptr;
  }

  // Flat or hierarchical, and which flat algorithm, for an allreduce of
  // `bytes` (with `tiers`, where the job has them).
  const Choice& Choose(size_t bytes, const HostTiers* tiers) {
    const bool shared = SharedUsable(comm_);
    const uint64_t key =
        (static_cast<uint64_t>(bytes) << 2) | (shared ? 2 : 0) | (tiers != nullptr ? 1 : 0);
    if (key == last_key_) return *last_;
    if (auto it = choices_.find(key); it != choices_.end()) return Remember(key, it->second);
    // Training repeats its sizes (a fused buffer's size a cycle); a job
    // that keeps making new ones starts over now and then.
    if (choices_.size() >= kMaxChoices) Forget();
    Choice c;
    if (tiers == nullptr) {
      c.flat = &selector_.ChooseAllreduce(comm_.size(), bytes, shared);
    } else {
      const int per_host = tiers->host->size();
      const int hosts = tiers->across->size();
      const HierarchyPrediction p = PredictHierarchy(selector_, hosts, per_host, bytes);
      const bool automatic = hierarchy_ == Hierarchy::kAuto;
      if (hierarchy_ == Hierarchy::kOne || (automatic && p.hierarchical_faster() && p.one_faster()))
        c.route = Route::kOneRank;
      else if (!automatic || p.hierarchical_faster())  // (kOff has no tiers)
        c.route = Route::kEveryRank;
      c.flat = p.flat;
      c.across = c.route == Route::kOneRank ? p.across_one : p.across;
      c.broadcast = p.broadcast_one;
      if (logger_ != nullptr && comm_.rank() == 0 && logger_->Enabled(LogLevel::kDebug)) {
        char text[360];
        std::snprintf(text, sizeof text,
                      "allreduce of %zu bytes on %d hosts x %d: %s (%s%s; cost model: flat %s "
                      "%.1f us, hierarchical with %s across %.1f us, with one rank a host and %s "
                      "across %.1f us)",
                      bytes, hosts, per_host,
                      c.route == Route::kOneRank
                          ? "hierarchical, one rank a host across"
                          : (c.route == Route::kEveryRank ? "hierarchical" : "flat"),
                      automatic ? "chosen" : "HORA_HIERARCHICAL_ALLREDUCE=",
                      automatic ? "" : HierarchyName(hierarchy_), p.flat->name, p.flat_s * 1e6,
                      p.across->name, p.hierarchical_s * 1e6, p.across_one->name, p.one_s * 1e6);
        logger_->Debug(text);
      }
    }
    return Remember(key, choices_.emplace(key, c).first->second);
  }

  const Choice& Remember(uint64_t key, const Choice& c) {
    last_key_ = key;
    last_ = &c;  // (an unordered_map's elements stay put until erased)
    return c;
  }

  void Forget() {
    choices_.clear();
    last_key_ = UINT64_MAX;
    last_ = nullptr;
  }

  static constexpr size_t kMaxChoices = 4096;

  Comm& comm_;
  Selector selector_;  // (autotuning replaces these two)
  Hierarchy hierarchy_;
  const bool job_spans_hosts_;
  const Logger* const logger_;
  bool tiers_tried_ = false;
  std::unique_ptr<HostTierComms> tier_comms_;
  std::unordered_map<uint64_t, Choice> choices_;  // by bytes << 2 | shared << 1 | tiers
  uint64_t last_key_ = UINT64_MAX;
  const Choice* last_ = nullptr;
};

}  // namespace

std::unique_ptr<CollectiveBackend> CreateHoraBackend(Comm& comm, Selector selector,
                                                     Hierarchy hierarchy, bool job_spans_hosts,
                                                     const Logger* logger) {
  return std::make_unique<HoraBackend>(comm, std::move(selector), hierarchy, job_spans_hosts,
                                       logger);
}

}  // namespace hora
