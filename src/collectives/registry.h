// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The algorithm registry: one row per algorithm, holding everything the rest
// of Hora knows of it: its names, what it needs to run, the function and its
// cost formula. The selector (selector.h) reads the rows for the names an
// override accepts, its error messages and the cost model; the backend runs
// the row the selector hands it. Neither names an algorithm, so adding one
// is its file (allreduce_<name>.cc, its function declared with its contract
// in algorithms.h) and one row here; and, only if it should win somewhere
// the cost model would not pick it, a range in the default selection.
//
// Row order matters twice: the accepted names in an override's error
// message are listed in it, and the cost model breaks a tie toward the
// earlier row.
//
// Adasum (ReduceOp::kAdasum) has no row: it computes a different result, not
// the same one another way, so the backend runs it by the op, never by
// selection.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>

#include "collectives/algorithms.h"
#include "common/config.h"

namespace hora {

// The alpha-beta-gamma model the rows' formulas are written in, with two
// links: within a host, and a host's link to the network.
struct CostModel {
  double alpha_s;                  // per message, within a host
  double beta_s_per_byte;          // per byte sent, within a host
  double gamma_s_per_byte;         // per byte reduced
  double net_alpha_s = 0;          // per message between hosts
  double net_beta_s_per_byte = 0;  // per byte over a host's link
  // The share of a link's bandwidth that several transfers crossing it at
  // once get together (HORA_COST_NET_SHARED_EFFICIENCY).
  double net_shared_efficiency = 1;
  // Where the Comm's ranks are: 0, all on one host; else this many on each
  // host, host after host (as horarun numbers them; other placements are
  // costed as if so).
  int per_host = 0;
  // Comms whose ranks cross the same host links at once, this one among
  // them (hierarchical allreduce's places): each crossing shares the link.
  int link_sharers = 1;
  // The ring's segment (HORA_RING_SEGMENT_BYTES): see cost::Ring.
  double segment_bytes = 256.0 * 1024;

  static CostModel FromConfig(const Config& c) {
    CostModel m{c.cost_alpha_us * 1e-6, 1.0 / (c.cost_bandwidth_gbps * 1e9),
                1.0 / (c.cost_reduce_gbps * 1e9), c.cost_net_alpha_us * 1e-6,
                1.0 / (c.cost_net_bandwidth_gbps * 1e9)};
    m.net_shared_efficiency = c.cost_net_shared_efficiency;
    m.segment_bytes = static_cast<double>(std::max<uint64_t>(c.ring_segment_bytes, 1));
    return m;
  }

  // This model for a Comm with `per_host` ranks on each host (1: every rank
  // on a host of its own), `sharers` Comms crossing the links at once.
  CostModel OnHosts(int ranks_per_host, int sharers = 1) const {
    CostModel m = *this;
    m.per_host = ranks_per_host;
    m.link_sharers = sharers;
    return m;
  }

  bool SpansHosts(int n) const { return per_host > 0 && per_host < n; }

  // One step of a ring of n ranks, every rank sending `bytes` to the next:
  // where the ring spans hosts, its slowest hop crosses from one host to the
  // next (one rank a host does).
  double Hop(int n, double bytes) const {
    return SpansHosts(n) ? net_alpha_s + bytes * LinkBeta(link_sharers)
                         : alpha_s + bytes * beta_s_per_byte;
  }

  // Seconds per byte of each of `transfers` crossing a host's link at once.
  double LinkBeta(int transfers) const {
    return transfers <= 1 ? net_beta_s_per_byte
                          : net_beta_s_per_byte * transfers / net_shared_efficiency;
  }

  // One round of recursive doubling or halving on n ranks (partners `mask`
  // apart among the fold's virtual ranks; mask 0: the fold itself), every
  // rank sending `bytes`: within hosts where every pair is, else over the
  // links, shared by the ranks of a host that cross at once.
  double Exchange(int n, int mask, double bytes) const;

  // Predicted seconds of algorithm `a` (a row below) on n ranks for `bytes`;
  // 0 for one rank.
  template <typename Algorithm>
  double Predict(const Algorithm& a, int n, size_t bytes) const {
    return n <= 1 ? 0.0 : a.cost(*this, n, static_cast<double>(bytes));
  }
};

// Predicted seconds on n >= 2 ranks for B bytes.
using CostFormula = double (*)(const CostModel& m, int n, double B);

// What an algorithm needs of the Comm it runs on.
enum class Needs : uint8_t {
  kAnyComm,       // any world size, any transport
  kSharedWindow,  // a usable shared window (shared_common.h's SharedUsable)
};

constexpr bool RunsOn(Needs needs, bool shared_window) {
  return needs == Needs::kAnyComm || shared_window;
}

struct AllreduceAlgorithm {
  const char* name;         // in overrides, logs and errors
  const char* alias;        // short form accepted in overrides
  const char* description;  // one line
  Needs needs;
  Status (*run)(Comm& comm, const AllreduceArgs& args);
  // The same over the engine's fused tensors, read and written where they
  // are; null: the backend packs them into one buffer for `run`.
  Status (*run_parts)(Comm& comm, std::span<const AllreducePart> parts, DataType dtype,
                      const Reduction& reduction);
  CostFormula cost;
};

struct BroadcastAlgorithm {
  const char* name;
  const char* alias;
  const char* description;
  Needs needs;
  Status (*run)(Comm& comm, void* data, size_t bytes, int root);
  CostFormula cost;
};

struct ReducescatterAlgorithm {
  const char* name;
  const char* alias;
  const char* description;
  Needs needs;
  Status (*run)(Comm& comm, const void* in, void* out, std::span<const size_t> counts,
                DataType dtype, const Reduction& reduction);
  CostFormula cost;  // B: the whole input's bytes
};

// Pieces of the cost formulas.
namespace cost {

inline double Log2Ceil(int n) {
  return n <= 1 ? 0.0 : std::ceil(std::log2(static_cast<double>(n)));
}

// The largest power of two not above n.
constexpr int PowerOfTwoFloor(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// Folding the ranks above the largest power of two into it and out again:
// two whole-message steps and one reduction (none for a power of two).
inline double Fold(const CostModel& m, int n, double B) {
  return PowerOfTwoFloor(n) == n ? 0.0 : 2 * m.Exchange(n, 0, B) + B * m.gamma_s_per_byte;
}

// With n ranks placed `per_host` a host, host after host: the most ranks of
// one host that send to other hosts at once in a round of recursive
// doubling or halving (partners `mask` apart among PowerOfTwoFold's virtual
// ranks; mask 0: the fold's pairs, 2i and 2i + 1); 0 where the round stays
// within hosts.
int CrossingFlows(int n, int per_host, int mask);

// (n - 1) / n: the share of the message a rank sends or reduces in a
// bandwidth-optimal algorithm.
inline double Share(int n) { return static_cast<double>(n - 1) / n; }

// A ring allreduce of B bytes on n ranks: n - 1 reduce-scatter steps, then
// n - 1 allgather steps, each moving a block of B / n to the next rank.
// A reduce-scatter step cuts its block into segments (segment_bytes) and
// reduces each as it arrives (IrecvReduce) while the next is in flight, so
// transfer and reduction overlap but for one segment: the step takes
// T + R - min(T, R) (1 - s / b), with T the block's transfer, R its
// reduction, b the block and s = min(b, segment). A block of one segment
// overlaps nothing (T + R). Halving-doubling reduces each half once the
// whole of it came. Side by side over TCP on one host, the ring was
// 1.2-1.7x faster than halving-doubling at 64 MiB at 2 to 4 ranks, and as
// fast or faster at 16 MiB (docs/dev/performance.md, session 60).
inline double Ring(const CostModel& m, int n, double B) {
  const double b = B / n;
  const double T = m.Hop(n, b);
  const double R = b * m.gamma_s_per_byte;
  const double overlap = b > m.segment_bytes ? std::min(T, R) * (1 - m.segment_bytes / b) : 0.0;
  return 2 * (n - 1) * T + Share(n) * B * m.gamma_s_per_byte - (n - 1) * overlap;
}

}  // namespace cost

// {name, alias, description, needs, run, run_parts, cost}
inline constexpr AllreduceAlgorithm kAllAllreduceAlgorithms[] = {
    {"ring", "ring", "reduce-scatter + allgather around a ring; bandwidth-optimal", Needs::kAnyComm,
     AllreduceRing, nullptr, cost::Ring},
    // Round k exchanges the whole buffer with the rank 2^k away.
    {"recursive_doubling", "rd", "log2(n) whole-buffer exchanges; fewest rounds, small messages",
     Needs::kAnyComm, AllreduceRecursiveDoubling, nullptr,
     [](const CostModel& m, int n, double B) {
       double t = cost::Fold(m, n, B);
       for (int d = 1; d < cost::PowerOfTwoFloor(n); d *= 2)
         t += m.Exchange(n, d, B) + B * m.gamma_s_per_byte;
       return t;
     }},
    // The reduce-scatter's rounds exchange p/2^k-th shares with the rank
    // p/2^k away, halving; the allgather retraces them.
    {"halving_doubling", "hd",
     "Rabenseifner: recursive-halving reduce-scatter + recursive-doubling allgather",
     Needs::kAnyComm, AllreduceHalvingDoubling, nullptr,
     [](const CostModel& m, int n, double B) {
       const int p = cost::PowerOfTwoFloor(n);
       double t = cost::Fold(m, n, B) + cost::Share(p) * B * m.gamma_s_per_byte;
       for (int d = p / 2; d >= 1; d /= 2) t += 2 * m.Exchange(n, d, B * d / p);
       return t;
     }},
    // Two steps; every byte copied in and out once and reduced once.
    {"shared_memory", "shm",
     "one copy into a shared window read in place by every rank; ranks of one host",
     Needs::kSharedWindow, AllreduceShared, AllreducePartsShared,
     [](const CostModel& m, int n, double B) {
       return 2 * m.alpha_s + 2 * B * m.beta_s_per_byte + cost::Share(n) * B * m.gamma_s_per_byte;
     }},
};

// The shared-memory broadcast's first chunk, copied in by the root before
// any reader copies it out, as a share of a send of it (below).
inline constexpr double kFirstChunkAlone = 0.45;

// {name, alias, description, needs, run, cost}
inline constexpr BroadcastAlgorithm kAllBroadcastAlgorithms[] = {
    {"binomial", "tree", "binomial tree; log2(n) rounds of the whole message", Needs::kAnyComm,
     BroadcastBinomial,
     [](const CostModel& m, int n, double B) {
       return cost::Log2Ceil(n) * (m.alpha_s + B * m.beta_s_per_byte);
     }},
    // The root's n-1 scatter sends leave its link one after another.
    {"scatter_allgather", "sag", "scatter from the root then ring allgather; large messages",
     Needs::kAnyComm, BroadcastScatterAllgather,
     [](const CostModel& m, int n, double B) {
       return (n - 1) * m.alpha_s + cost::Share(n) * B * m.beta_s_per_byte + (n - 1) * m.alpha_s +
              cost::Share(n) * B * m.beta_s_per_byte;
     }},
    // A step a chunk; each chunk copied in by the root and out by every
    // reader at once, the root's copy of one overlapping the readers' of
    // the one before (as a send's segments): one hop for every reader at
    // once, and the first chunk's copy in alone, a single copy where a
    // send's beta counts two overlapping: 0.45 of a send of it, as measured
    // against the tree's one send at two ranks (64 KiB: 11.2-11.3 us
    // against 7.4-8.1). There the tree stays cheaper: it was faster up to
    // 64 KiB and as fast from 1 MiB (docs/dev/performance.md, sessions 64
    // and 69); from three ranks the window was faster at every size.
    {"shared_memory", "shm",
     "the root's copy in a shared window, read in place by every rank; ranks of one host",
     Needs::kSharedWindow, BroadcastShared,
     [](const CostModel& m, int, double B) {
       const double chunk = static_cast<double>(kBroadcastSharedChunkBytes);
       return std::max(1.0, std::ceil(B / chunk)) * m.alpha_s +
              (B + kFirstChunkAlone * std::min(B, chunk)) * m.beta_s_per_byte;
     }},
};

// {name, alias, description, needs, run, cost}
inline constexpr ReducescatterAlgorithm kAllReducescatterAlgorithms[] = {
    // The input copied whole into a working buffer, n - 1 ring steps of a
    // block each (reduced as segments arrive: as the ring allreduce's first
    // half), the rank's block copied out.
    {"ring", "ring", "n-1 steps around a ring, a block each", Needs::kAnyComm, ReducescatterRing,
     [](const CostModel& m, int n, double B) {
       const double b = B / n;
       return (n - 1) * m.Hop(n, b) + cost::Share(n) * B * m.gamma_s_per_byte +
              (B + b) * m.beta_s_per_byte;
     }},
    // Each rank copies the others' blocks into its region, a piece of each
    // a step (n pieces fill half a region: 1 MiB of the data window), and
    // reduces its own from its input and their regions.
    {"shared_memory", "shm",
     "the others' blocks copied into a shared window, each rank's own reduced from them in "
     "place; ranks of one host",
     Needs::kSharedWindow, ReducescatterShared,
     [](const CostModel& m, int n, double B) {
       return std::max(1.0, std::ceil(B / (1 << 20))) * m.alpha_s +
              cost::Share(n) * B * (m.beta_s_per_byte + m.gamma_s_per_byte);
     }},
};

// Where no range of a selection applies, the cost model picks among the
// rows that can run on the Comm: one of each kind must run on any.
static_assert(std::ranges::any_of(kAllAllreduceAlgorithms,
                                  [](const auto& a) { return a.needs == Needs::kAnyComm; }));
static_assert(std::ranges::any_of(kAllBroadcastAlgorithms,
                                  [](const auto& a) { return a.needs == Needs::kAnyComm; }));
static_assert(std::ranges::any_of(kAllReducescatterAlgorithms,
                                  [](const auto& a) { return a.needs == Needs::kAnyComm; }));

// The rows of one kind: Algorithms<AllreduceAlgorithm>().
template <typename Algorithm>
constexpr std::span<const Algorithm> Algorithms();
template <>
constexpr std::span<const AllreduceAlgorithm> Algorithms() {
  return kAllAllreduceAlgorithms;
}
template <>
constexpr std::span<const BroadcastAlgorithm> Algorithms() {
  return kAllBroadcastAlgorithms;
}
template <>
constexpr std::span<const ReducescatterAlgorithm> Algorithms() {
  return kAllReducescatterAlgorithms;
}

// The row with this name or alias, or null.
template <typename Algorithm>
constexpr const Algorithm* FindAlgorithm(std::string_view name_or_alias) {
  for (const Algorithm& a : Algorithms<Algorithm>()) {
    if (name_or_alias == a.name || name_or_alias == a.alias) return &a;
  }
  return nullptr;
}

}  // namespace hora
