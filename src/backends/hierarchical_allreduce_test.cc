// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Hierarchical allreduce (HORA_HIERARCHICAL_ALLREDUCE) through the Hora
// backend, ranks as threads on hosts of loopback hubs: each rank's
// transport is the hybrid one (its host's hub, standing for shared memory;
// one hub for the job, standing for TCP, whose bytes are counted).
//  - every rank gets the reduction over the job's ranks, computed here, for
//    2 and 3 hosts of 2 and 3 ranks, sizes 0 to 64K+1 elements, float32,
//    float64 and int32, sum, average with pre- and postscale, min, max,
//    product, in place and not;
//  - the bytes a rank sends to other hosts are its block's share
//    (2(H-1)/H of count/L elements), not the flat algorithms'; with one
//    rank a host crossing (HORA_HIERARCHICAL_ALLREDUCE=one), that rank's
//    share of the whole message, and none from the others;
//  - auto takes one rank a host where the cost model says so (links that
//    lose bandwidth when shared);
//  - where the tiers cannot be had (one host, hosts of different sizes,
//    one rank per host), the result is the same, by the flat algorithms,
//    and hosts of different sizes are named in one warning.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/hora_backend.h"
#include "collectives/hierarchy_cost.h"
#include "common/config.h"
#include "common/logging.h"
#include "support/forwarding_transport.h"
#include "transport/combinators/hybrid/hybrid_transport.h"
#include "transport/loopback/loopback_transport.h"

namespace hora {
namespace {

constexpr Duration kTimeout = std::chrono::seconds(30);

// Forwards to a transport and counts the bytes sent through it; stands for
// TCP, so it offers no shared window (the loopback hub it wraps would).
class Counting final : public testing::ForwardingTransport {
 public:
  Counting(std::unique_ptr<Transport> t, std::atomic<uint64_t>* sent)
      : ForwardingTransport(std::move(t)), sent_(sent) {}
  Request Isend(int peer, Tag tag, const void* data, size_t bytes) override {
    *sent_ += bytes;
    return ForwardingTransport::Isend(peer, tag, data, bytes);
  }
  SharedWindow* Window(uint32_t context) override {
    (void)context;
    return nullptr;
  }

 private:
  std::atomic<uint64_t>* sent_;
};

// `algo`: HORA_ALLREDUCE_ALGO (empty: the cost model); `shared`:
// HORA_COST_NET_SHARED_EFFICIENCY.
Selector MakeSelector(const std::string& algo, const std::string& shared = "1") {
  auto c =
      ConfigFromEnv({{"HORA_ALLREDUCE_ALGO", algo}, {"HORA_COST_NET_SHARED_EFFICIENCY", shared}});
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  auto s = Selector::Create(*c);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

// Runs fn(rank, backend) on hosts of `per_host[h]` ranks (the job's ranks in
// host order), every rank's backend hierarchical or not; the bytes each
// rank sent to other hosts land in `across`; `algo` is the selector's
// HORA_ALLREDUCE_ALGO; the backends log through `logger`.
std::vector<Status> OnHosts(const std::vector<int>& per_host, Hierarchy hierarchy,
                            const std::function<Status(int, CollectiveBackend&)>& fn,
                            std::vector<std::atomic<uint64_t>>* across,
                            const std::string& algo = "", const Logger* logger = nullptr,
                            const std::string& shared = "1") {
  int n = 0;
  for (int l : per_host) n += l;
  const Selector selector = MakeSelector(algo, shared);
  auto network = LoopbackHub::Create(n);
  std::vector<std::unique_ptr<Transport>> transports;
  int g = 0;
  for (int l : per_host) {
    auto shm = LoopbackHub::Create(l);
    std::vector<int> local;
    for (int i = 0; i < l; ++i) local.push_back(g + i);
    for (int i = 0; i < l; ++i, ++g) {
      auto tcp =
          std::make_unique<Counting>(network->Connect(g), &(*across)[static_cast<size_t>(g)]);
      // A rank alone on its host reaches every rank over TCP.
      transports.push_back(
          l == 1 ? std::move(tcp)
                 : CreateHybridTransport(g, n, local, shm->Connect(i), std::move(tcp)));
    }
  }
  std::vector<Status> st(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Comm data(*transports[static_cast<size_t>(r)], WaitPolicy{kTimeout, {}, nullptr}, 64 << 10,
                1);
      // (The job spans hosts where it has two or more, as its layout says.)
      std::unique_ptr<CollectiveBackend> b =
          CreateHoraBackend(data, selector, hierarchy, per_host.size() > 1, logger);
      st[static_cast<size_t>(r)] = fn(r, *b);
    });
  }
  for (std::thread& t : threads) t.join();
  return st;
}

double Value(int r, size_t i) { return static_cast<double>((r * 7 + i * 3) % 5 + 1); }

// The element every rank should get: `op` over the job's `n` ranks.
double Want(const Reduction& red, int n, size_t i, bool integral) {
  double acc = 0;
  for (int r = 0; r < n; ++r) {
    const double v = Value(r, i) * red.prescale_factor;
    if (r == 0) {
      acc = v;
    } else if (red.op == ReduceOp::kMin) {
      acc = std::min(acc, v);
    } else if (red.op == ReduceOp::kMax) {
      acc = std::max(acc, v);
    } else if (red.op == ReduceOp::kProduct) {
      acc *= v;
    } else {
      acc += v;
    }
  }
  if (red.op == ReduceOp::kAverage) acc = integral ? std::trunc(acc / n) : acc / n;
  return acc * red.postscale_factor;
}

template <typename T>
Status RunOne(int r, int n, CollectiveBackend& b, size_t count, const Reduction& red, bool in_place,
              DataType dtype) {
  std::vector<T> in(count), out(count, T(-1));
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<T>(Value(r, i));
  T* dst = in_place ? in.data() : out.data();
  HORA_RETURN_IF_ERROR(b.Allreduce({in.data(), dst, count, dtype, red}));
  const bool integral = dtype == DataType::kInt32;
  for (size_t i = 0; i < count; ++i) {
    const double want = Want(red, n, i, integral);
    if (std::abs(static_cast<double>(dst[i]) - want) > 1e-5 * std::abs(want)) {
      return InternalError("rank " + std::to_string(r) + ": " + ReduceOpName(red.op) + " of " +
                           std::to_string(count) + " elements: element " + std::to_string(i) +
                           " is " + std::to_string(static_cast<double>(dst[i])) + ", want " +
                           std::to_string(want));
    }
  }
  return Status::Ok();
}

const std::vector<size_t> kCounts = {0, 1, 7, 1001, 65537};

std::vector<Reduction> Reductions(bool integral) {
  std::vector<Reduction> out = {{ReduceOp::kSum, 1.0, 1.0},
                                {ReduceOp::kMin, 1.0, 1.0},
                                {ReduceOp::kMax, 1.0, 1.0},
                                {ReduceOp::kProduct, 1.0, 1.0},
                                {ReduceOp::kAverage, 1.0, 1.0}};
  if (!integral) out.push_back({ReduceOp::kAverage, 2.0, 0.5});
  return out;
}

// Every case above on every rank; the results checked.
Status AllCases(int r, int n, CollectiveBackend& b) {
  for (size_t count : kCounts) {
    for (const Reduction& red : Reductions(false)) {
      HORA_RETURN_IF_ERROR(RunOne<float>(r, n, b, count, red, count % 2 == 0, DataType::kFloat32));
      HORA_RETURN_IF_ERROR(RunOne<double>(r, n, b, count, red, count % 2 == 1, DataType::kFloat64));
    }
    for (const Reduction& red : Reductions(true)) {
      HORA_RETURN_IF_ERROR(RunOne<int32_t>(r, n, b, count, red, false, DataType::kInt32));
    }
  }
  return Status::Ok();
}

void ExpectOk(const std::vector<Status>& st) {
  for (size_t r = 0; r < st.size(); ++r) EXPECT_TRUE(st[r].ok()) << st[r].ToString();
}

class HierarchicalAllreduce : public ::testing::TestWithParam<std::vector<int>> {};

TEST_P(HierarchicalAllreduce, GivesTheJobsReductionOnEveryRank) {
  const std::vector<int> hosts = GetParam();
  int n = 0;
  for (int l : hosts) n += l;
  // Always (every rank crossing, and one rank a host), and by the cost
  // model (flat for the small sizes, hierarchical for the large:
  // AutoFollowsTheCostModelSizeBySize).
  for (Hierarchy h : {Hierarchy::kOn, Hierarchy::kOne, Hierarchy::kAuto}) {
    std::vector<std::atomic<uint64_t>> across(static_cast<size_t>(n));
    ExpectOk(OnHosts(
        hosts, h, [&](int r, CollectiveBackend& b) { return AllCases(r, n, b); }, &across));
  }
}

// The bytes each rank sent to other hosts in an allreduce of `count`
// float32, the tiers found by a first allreduce of the same size (whose
// bytes are not counted: the choice for `count` is the backend's first); the
// most any rank sent.
uint64_t MostSentAcross(const std::vector<int>& hosts, Hierarchy h, size_t count,
                        const std::string& algo, const std::string& shared = "1",
                        std::vector<uint64_t>* each = nullptr) {
  const size_t n = hosts.size() * static_cast<size_t>(hosts[0]);
  std::vector<std::atomic<uint64_t>> across(n);
  std::vector<uint64_t> before(n);
  ExpectOk(OnHosts(
      hosts, h,
      [&](int r, CollectiveBackend& b) -> Status {
        HORA_RETURN_IF_ERROR(
            RunOne<float>(r, static_cast<int>(n), b, count, {}, true, DataType::kFloat32));
        before[static_cast<size_t>(r)] = across[static_cast<size_t>(r)];
        return RunOne<float>(r, static_cast<int>(n), b, count, {ReduceOp::kSum, 1.0, 1.0}, true,
                             DataType::kFloat32);
      },
      &across, algo, nullptr, shared));
  uint64_t most = 0;
  for (size_t r = 0; r < n; ++r) {
    most = std::max(most, across[r] - before[r]);
    if (each != nullptr) each->push_back(across[r] - before[r]);
  }
  return most;
}

TEST_P(HierarchicalAllreduce, SendsAcrossHostsOnlyTheBlocksShare) {
  const std::vector<int> hosts = GetParam();
  const size_t h = hosts.size(), l = static_cast<size_t>(hosts[0]);
  constexpr size_t kCount = 1 << 18;  // float32: 1 MiB
  // A ring of h ranks over the block: 2(h-1)/h of it, in h pieces.
  const uint64_t block = (kCount + l - 1) / l * 4;
  const uint64_t share = 2 * (h - 1) * ((block + h - 1) / h);
  // (With the ring across hosts, and flat; auto: the cost model predicts
  // the hierarchy faster for 1 MiB at the default costs.)
  for (Hierarchy hierarchy : {Hierarchy::kOn, Hierarchy::kOff, Hierarchy::kAuto}) {
    const uint64_t most = MostSentAcross(hosts, hierarchy, kCount, "ring");
    if (hierarchy != Hierarchy::kOff) {
      EXPECT_GT(most, 0u);
      EXPECT_LE(most, share) << "a rank sent " << most << " B to other hosts, its share is "
                             << share
                             << " (HORA_HIERARCHICAL_ALLREDUCE=" << HierarchyName(hierarchy) << ")";
    } else {
      // The flat ring sends 2(n-1)/n of the message from a rank to the
      // next host's first rank.
      EXPECT_GT(most, share) << "flat: the most a rank sent to other hosts";
    }
  }
}

TEST_P(HierarchicalAllreduce, OneRankAHostCrossesWithTheWholeMessage) {
  const std::vector<int> hosts = GetParam();
  const size_t h = hosts.size(), l = static_cast<size_t>(hosts[0]);
  for (size_t count : {size_t{1} << 18, size_t{1001}}) {  // float32: 1 MiB, and odd
    // The host's first ranks send what the ranks of a flat ring over h
    // hosts of one rank send, rank for rank; the others send nothing.
    std::vector<uint64_t> ring, each;
    MostSentAcross(std::vector<int>(h, 1), Hierarchy::kOff, count, "ring", "1", &ring);
    MostSentAcross(hosts, Hierarchy::kOne, count, "ring", "1", &each);
    ASSERT_EQ(each.size(), h * l);
    for (size_t r = 0; r < each.size(); ++r) {
      if (r % l == 0) {  // the host's first rank
        EXPECT_EQ(each[r], ring[r / l]) << "rank " << r << ", " << count << " floats";
        EXPECT_GT(each[r], 0u);
      } else {
        EXPECT_EQ(each[r], 0u) << "rank " << r << " sent to other hosts, " << count << " floats";
      }
    }
  }
}

TEST_P(HierarchicalAllreduce, AutoTakesOneRankAHostWhereTheCostModelSays) {
  const std::vector<int> hosts = GetParam();
  const int h = static_cast<int>(hosts.size()), l = hosts[0];
  constexpr size_t kCount = 1 << 16;  // float32: 256 KiB
  std::vector<uint64_t> one, every, automatic;
  MostSentAcross(hosts, Hierarchy::kOne, kCount, "ring", "1", &one);
  MostSentAcross(hosts, Hierarchy::kOn, kCount, "ring", "1", &every);
  ASSERT_NE(one, every) << "the bytes each rank sent across tell them apart";
  // Links that lose half their bandwidth when shared, and that lose none.
  for (const char* shared : {"0.5", "1"}) {
    const HierarchyPrediction p = PredictHierarchy(MakeSelector("ring", shared), h, l, kCount * 4);
    ASSERT_TRUE(p.hierarchical_faster()) << shared;
    automatic.clear();
    MostSentAcross(hosts, Hierarchy::kAuto, kCount, "ring", shared, &automatic);
    EXPECT_EQ(automatic, p.one_faster() ? one : every) << "efficiency " << shared;
    EXPECT_EQ(p.one_faster(), std::string(shared) == "0.5") << "efficiency " << shared;
  }
}

TEST_P(HierarchicalAllreduce, AutoFollowsTheCostModelSizeBySize) {
  const std::vector<int> hosts = GetParam();
  const int h = static_cast<int>(hosts.size()), l = hosts[0];
  struct Case {
    size_t count;  // float32
    const char* algo;
  };
  // (One algorithm named, so that flat and across are the same either way.)
  for (const Case& c : {Case{16, "rd"}, Case{1 << 16, "ring"}}) {
    const bool hierarchical =
        PredictHierarchy(MakeSelector(c.algo), h, l, c.count * 4).hierarchical_faster();
    if (hosts == std::vector<int>{2, 2}) {
      // Both ways: 64 B flat (one crossing against the hierarchy's two
      // steps within the host and one across), 256 KiB hierarchical.
      EXPECT_EQ(hierarchical, c.count > 16) << c.count;
    }
    const uint64_t flat = MostSentAcross(hosts, Hierarchy::kOff, c.count, c.algo);
    const uint64_t on = MostSentAcross(hosts, Hierarchy::kOn, c.count, c.algo);
    ASSERT_NE(flat, on) << "the bytes sent across tell them apart";
    EXPECT_EQ(MostSentAcross(hosts, Hierarchy::kAuto, c.count, c.algo), hierarchical ? on : flat)
        << c.count << " floats, the cost model predicting "
        << (hierarchical ? "hierarchical" : "flat") << " faster";
  }
}

// One backend, sizes taking turns (as a training step's fused buffers do):
// each call sends across hosts what a backend doing only that size sends,
// so each size keeps its own choice (flat or hierarchical, and the
// algorithms) however the sizes interleave.
void SizesTakingTurns(const std::vector<int>& hosts, const std::string& shared) {
  const size_t n = hosts.size() * static_cast<size_t>(hosts[0]);
  const std::vector<size_t> counts = {16, 1 << 16, 16, 1001, 1 << 16, 1001, 16};
  std::vector<std::atomic<uint64_t>> across(n);
  std::vector<std::vector<uint64_t>> sent(n, std::vector<uint64_t>(counts.size()));
  ExpectOk(OnHosts(
      hosts, Hierarchy::kAuto,
      [&](int r, CollectiveBackend& b) -> Status {
        const size_t me = static_cast<size_t>(r);
        HORA_RETURN_IF_ERROR(
            RunOne<float>(r, static_cast<int>(n), b, 1, {}, true, DataType::kFloat32));
        for (size_t i = 0; i < counts.size(); ++i) {
          const uint64_t before = across[me];
          HORA_RETURN_IF_ERROR(RunOne<float>(r, static_cast<int>(n), b, counts[i],
                                             {ReduceOp::kSum, 1.0, 1.0}, true, DataType::kFloat32));
          sent[me][i] = across[me] - before;
        }
        return Status::Ok();
      },
      &across, "", nullptr, shared));
  for (size_t i = 0; i < counts.size(); ++i) {
    std::vector<uint64_t> alone;
    MostSentAcross(hosts, Hierarchy::kAuto, counts[i], "", shared, &alone);
    for (size_t r = 0; r < n; ++r) {
      EXPECT_EQ(sent[r][i], alone[r]) << "rank " << r << ", call " << i << ", " << counts[i]
                                      << " floats, efficiency " << shared;
    }
  }
}

TEST_P(HierarchicalAllreduce, SizesTakingTurnsKeepTheirOwnChoices) {
  // (Links that lose nothing shared, and half: where the large sizes take
  // one rank a host and the small ones not, the other places' Comms across
  // hosts sit out some calls and not others.)
  for (const char* shared : {"1", "0.5"}) SizesTakingTurns(GetParam(), shared);
}

INSTANTIATE_TEST_SUITE_P(Hosts, HierarchicalAllreduce,
                         ::testing::Values(std::vector<int>{2, 2}, std::vector<int>{2, 2, 2},
                                           std::vector<int>{3, 3}));

TEST(HierarchicalAllreduceFallback, WithoutTiersTheFlatAlgorithmsGiveTheSameResult) {
  const Logger logger(LogLevel::kWarning, 0);
  // A rank alone on its host has TCP alone (no host transport), its peers a
  // hybrid one: every rank must still look for tiers, or none.
  for (const std::vector<int>& hosts :
       {std::vector<int>{4}, std::vector<int>{2, 3}, std::vector<int>{1, 1, 1},
        std::vector<int>{2, 1}, std::vector<int>{1, 2}}) {
    int n = 0;
    for (int l : hosts) n += l;
    const bool unequal = hosts.size() > 1 && hosts[0] != hosts[1];
    for (Hierarchy h : {Hierarchy::kOn, Hierarchy::kOne, Hierarchy::kAuto}) {
      std::vector<std::atomic<uint64_t>> across(static_cast<size_t>(n));
      ::testing::internal::CaptureStderr();
      ExpectOk(OnHosts(
          hosts, h, [&](int r, CollectiveBackend& b) { return AllCases(r, n, b); }, &across, "",
          &logger));
      const std::string said = ::testing::internal::GetCapturedStderr();
      // Hosts of unequal sizes: asked for (1 or one) and not given, said
      // once, naming the setting. One host, a rank a host, or auto: nothing
      // said.
      const std::string why = "allreduces run flat: the hosts have different numbers of ranks";
      if (unequal && h != Hierarchy::kAuto) {
        EXPECT_NE(said.find(std::string("(HORA_HIERARCHICAL_ALLREDUCE=") + HierarchyName(h) + ")"),
                  std::string::npos)
            << said;
        EXPECT_NE(said.find(why), std::string::npos) << said;
        EXPECT_EQ(said.find(why), said.rfind(why)) << said;
      } else {
        EXPECT_EQ(said, "") << HierarchyName(h);
      }
    }
  }
}

}  // namespace
}  // namespace hora
