// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The host tiers of a job spanning hosts, and the GPU allreduce across them
// (allreduce_device_window.h's AcrossHosts), with ranks as threads: each
// rank's transport is the hybrid one (shared memory within its host, here a
// loopback hub per host; TCP across, here one hub for the job), each host
// has one host device its ranks share.
//  - Find gives the tiers where every host has as many ranks, none (and
//    why) where the hosts differ, none (silently) on one host;
//  - the allreduce (2 and 3 hosts of 2 and 3 ranks; fused parts, sizes 0
//    to many chunks, both paths of the window; sum, and average with pre-
//    and postscale) gives every rank the sum over every host's ranks;
//  - a rank whose GPU fails fails every rank of every host, each naming
//    it, and the next allreduce on the same windows is whole.
#include "backends/host_tiers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/allreduce_device_window.h"
#include "common/config.h"
#include "doubles/host_device.h"
#include "gpu/blocking_copy.h"
#include "transport/combinators/hybrid/hybrid_transport.h"
#include "transport/loopback/loopback_transport.h"

namespace hora {
namespace {

constexpr Duration kTimeout = std::chrono::seconds(30);
constexpr size_t kWindowBytes = 40000;  // halves of 19968 bytes: 4992 floats

Selector MakeSelector() {
  auto c = ConfigFromEnv({});
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  auto s = Selector::Create(*c);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

struct RankEnv {
  int rank = 0;  // the job's
  Comm* data = nullptr;
  std::shared_ptr<gpu::Device> device;  // its host's
  gpu::Stream stream;
  const Selector* selector = nullptr;
};

// Runs fn on the ranks of hosts with `per_host[h]` ranks each (the job's
// ranks in host order). Returns each rank's status.
std::vector<Status> OnHosts(const std::vector<int>& per_host,
                            const std::function<Status(const RankEnv&)>& fn) {
  int n = 0;
  for (int l : per_host) n += l;
  const Selector selector = MakeSelector();
  auto across = LoopbackHub::Create(n);
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<RankEnv> envs;
  int g = 0;
  for (int l : per_host) {
    auto shm = LoopbackHub::Create(l);
    auto d = gpu::HostDevice::Create(0, size_t{1} << 30);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    std::shared_ptr<gpu::Device> device(std::move(*d));
    std::vector<int> local;
    for (int i = 0; i < l; ++i) local.push_back(g + i);
    for (int i = 0; i < l; ++i, ++g) {
      // A rank alone on its host reaches every rank over TCP.
      transports.push_back(
          l == 1 ? across->Connect(g)
                 : CreateHybridTransport(g, n, local, shm->Connect(i), across->Connect(g)));
      auto s = device->CreateStream();
      EXPECT_TRUE(s.ok());
      envs.push_back(RankEnv{g, nullptr, device, *s, &selector});
    }
  }
  std::vector<Status> st(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Comm data(*transports[static_cast<size_t>(r)], WaitPolicy{kTimeout, {}, nullptr}, 256 << 10,
                1);
      RankEnv env = envs[static_cast<size_t>(r)];
      env.data = &data;
      st[static_cast<size_t>(r)] = fn(env);
    });
  }
  for (std::thread& t : threads) t.join();
  for (RankEnv& e : envs) (void)e.device->DestroyStream(e.stream);
  return st;
}

float Value(int r, size_t p, size_t i) {
  return static_cast<float>((r * 7 + static_cast<int>(p) * 3 + static_cast<int>(i % 11)) % 13);
}

// Device copies of rank r's parts (Value), with their pointers in `mem`.
Result<std::vector<AllreducePart>> Parts(gpu::Device& dev, int r, const std::vector<size_t>& counts,
                                         std::vector<void*>* mem) {
  std::vector<AllreducePart> parts;
  for (size_t p = 0; p < counts.size(); ++p) {
    std::vector<float> host(counts[p]);
    for (size_t i = 0; i < counts[p]; ++i) host[i] = Value(r, p, i);
    HORA_ASSIGN_OR_RETURN(void* d, dev.Allocate(counts[p] * 4 + 4));
    HORA_RETURN_IF_ERROR(gpu::CopyHostToDevice(dev, d, host.data(), counts[p] * 4, kTimeout));
    mem->push_back(d);
    parts.push_back({d, d, counts[p]});
  }
  return parts;
}

// Every part against sum over the job's `n` ranks of Value, scaled as
// `red` says.
Status Check(gpu::Device& dev, int r, int n, const std::vector<size_t>& counts,
             const std::vector<void*>& mem, const Reduction& red) {
  for (size_t p = 0; p < counts.size(); ++p) {
    std::vector<float> got(counts[p]);
    HORA_RETURN_IF_ERROR(gpu::CopyDeviceToHost(dev, got.data(), mem[p], counts[p] * 4, kTimeout));
    for (size_t i = 0; i < counts[p]; ++i) {
      float want = 0;
      for (int k = 0; k < n; ++k) want += Value(k, p, i) * static_cast<float>(red.prescale_factor);
      if (red.op == ReduceOp::kAverage) want /= static_cast<float>(n);
      want *= static_cast<float>(red.postscale_factor);
      if (std::abs(got[i] - want) > 1e-6f * std::abs(want)) {
        return InternalError("rank " + std::to_string(r) + " part " + std::to_string(p) + " (" +
                             std::to_string(counts[p]) + " elements) element " + std::to_string(i) +
                             ": " + std::to_string(got[i]) + ", want " + std::to_string(want));
      }
    }
  }
  return Status::Ok();
}

// One rank's tiers, window and host memory, for the allreduces.
struct Tiered {
  std::unique_ptr<HostTierComms> comms;
  std::unique_ptr<DeviceWindow> window;
  void* pinned = nullptr;
  AcrossHosts across;
};

Result<Tiered> OpenTiers(const RankEnv& e, size_t chunk_bytes = 0) {
  Tiered t;
  std::string why;
  HORA_ASSIGN_OR_RETURN(t.comms, HostTierComms::Find(*e.data, e.selector, &why));
  if (!t.comms) return InternalError("no tiers: " + why);
  const HostTiers& tiers = t.comms->tiers();
  HORA_ASSIGN_OR_RETURN(t.window, DeviceWindow::Open(*tiers.host, e.device, e.stream, kWindowBytes,
                                                     kTimeout, true, {}, &why));
  if (!t.window) return InternalError("no window: " + why);
  HORA_ASSIGN_OR_RETURN(t.pinned, e.device->AllocatePinned(t.window->half_bytes()));
  t.across = AcrossHosts{tiers.across, tiers.selector, t.pinned, tiers.world, chunk_bytes, {}};
  for (gpu::Event& ev : t.across.events) {
    HORA_ASSIGN_OR_RETURN(ev, e.device->CreateEvent());
  }
  return t;
}

Status CloseTiers(const RankEnv& e, Tiered& t) {
  Status st = t.window->Close(*t.comms->tiers().host);
  (void)e.device->FreePinned(t.pinned);
  for (gpu::Event ev : t.across.events) (void)e.device->DestroyEvent(ev);
  return st;
}

TEST(HostTiers, FoundWhereEveryHostHasAsManyRanks) {
  struct Case {
    std::vector<int> hosts;
    bool tiers;
    const char* why;  // (when none)
  };
  for (const Case& c :
       {Case{{2, 2}, true, ""}, Case{{3, 3, 3}, true, ""},
        Case{{2, 1}, false, "rank 2's host has 1, rank 0's has 2"},
        Case{{2, 3}, false, "rank 2's host has 3, rank 0's has 2"}, Case{{3}, false, ""}}) {
    std::vector<std::string> why(9);
    std::vector<std::vector<int>> across(9);
    auto st = OnHosts(c.hosts, [&](const RankEnv& e) -> Status {
      HORA_ASSIGN_OR_RETURN(
          auto t, HostTierComms::Find(*e.data, e.selector, &why[static_cast<size_t>(e.rank)]));
      if (static_cast<bool>(t) != c.tiers) return InternalError("tiers where none, or none");
      if (!t) return Status::Ok();
      const HostTiers& h = t->tiers();
      if (h.world != e.data->size() || h.host->size() != c.hosts[0] ||
          h.across->size() != static_cast<int>(c.hosts.size())) {
        return InternalError("the tiers' sizes");
      }
      for (int k = 0; k < h.across->size(); ++k)
        across[static_cast<size_t>(e.rank)].push_back(h.across->Number(k));
      // Both tiers work: a barrier on each.
      HORA_RETURN_IF_ERROR(BarrierDissemination(*h.across));
      return BarrierShared(*h.host);
    });
    for (size_t r = 0; r < st.size(); ++r) {
      EXPECT_TRUE(st[r].ok()) << "hosts of " << c.hosts[0] << ": " << st[r].ToString();
    }
    if (c.tiers) {
      // The ranks with one place on each host: 0 with 2 (and 4), 1 with 3 ...
      const int l = c.hosts[0];
      for (size_t r = 0; r < st.size(); ++r) {
        for (size_t h = 0; h < c.hosts.size(); ++h) {
          EXPECT_EQ(across[r][h], static_cast<int>(h) * l + static_cast<int>(r) % l) << r;
        }
      }
    } else {
      for (size_t r = 0; r < st.size(); ++r) {
        EXPECT_NE(why[r].find(c.why), std::string::npos) << why[r];
        if (*c.why == '\0') {
          EXPECT_EQ(why[r], "");
        }
      }
    }
  }
}

const std::vector<std::vector<size_t>> kBatches = {
    {0}, {1}, {1031}, {4000}, {4993}, {30011}, {3, 0, 1500, 2800, 7, 9000, 1}};

// (`chunk_bytes` 1000: the exchanges go in pieces of 250 floats, pipelined.)
TEST(HostTiers, GpuAllreduceAcrossHostsHasEveryRanksData) {
  for (const std::vector<int>& hosts : std::vector<std::vector<int>>{{2, 2}, {3, 3}, {2, 2, 2}})
    for (const size_t chunk_bytes : {size_t{0}, size_t{1000}}) {
      auto st = OnHosts(hosts, [&](const RankEnv& e) -> Status {
        HORA_ASSIGN_OR_RETURN(Tiered t, OpenTiers(e, chunk_bytes));
        for (const auto& counts : kBatches) {
          for (const Reduction& red :
               {Reduction{ReduceOp::kSum, 1.0, 1.0}, Reduction{ReduceOp::kAverage, 2.0, 0.5}}) {
            std::vector<void*> mem;
            HORA_ASSIGN_OR_RETURN(auto parts, Parts(*e.device, e.rank, counts, &mem));
            HORA_RETURN_IF_ERROR(AllreduceDeviceWindow(*t.comms->tiers().host, *t.window, parts,
                                                       DataType::kFloat32, red, &t.across));
            HORA_RETURN_IF_ERROR(t.window->WaitDevice("the copies out"));
            HORA_RETURN_IF_ERROR(Check(*e.device, e.rank, e.data->size(), counts, mem, red));
            for (void* m : mem) HORA_RETURN_IF_ERROR(e.device->Free(m));
          }
        }
        return CloseTiers(e, t);
      });
      for (size_t r = 0; r < st.size(); ++r) {
        EXPECT_TRUE(st[r].ok()) << hosts.size() << " hosts, exchanges in pieces of " << chunk_bytes
                                << " bytes: " << st[r].ToString();
      }
    }
}

// Rank `bad` gives an input the device refuses (host memory): its
// host stops, the others go on across hosts to the end, and every rank
// fails naming it. Then an allreduce on the same windows is whole.
TEST(HostTiers, ARanksGpuFailureFailsEveryHostNamingIt) {
  for (const size_t count : {size_t{1000}, size_t{12000}}) {  // one step; two steps
    for (const int bad : {3, 0}) {
      const std::vector<int> hosts = {2, 2, 2};
      auto st = OnHosts(hosts, [&](const RankEnv& e) -> Status {
        HORA_ASSIGN_OR_RETURN(Tiered t, OpenTiers(e, 1000));
        std::vector<void*> mem;
        HORA_ASSIGN_OR_RETURN(auto parts, Parts(*e.device, e.rank, {count}, &mem));
        // (Host memory, which the device refuses: a freed allocation might
        // come back to another rank of its host before the collective.)
        std::vector<float> not_on_device(count);
        if (e.rank == bad) parts[0] = {not_on_device.data(), not_on_device.data(), count};
        Status failed = AllreduceDeviceWindow(*t.comms->tiers().host, *t.window, parts,
                                              DataType::kFloat32, {}, &t.across);
        if (failed.ok())
          return InternalError("the allreduce went on without rank " + std::to_string(bad) +
                               "'s data");
        // Its host's ranks, and the other hosts', name it as such.
        const std::string named = e.rank == bad ? ""
                                  : e.rank / 2 == bad / 2
                                      ? "rank " + std::to_string(bad) +
                                            " failed on its GPU or in its "
                                            "exchange across hosts"
                                      : "rank " + std::to_string(bad) + " of another host failed";
        if (failed.message().find(named) == std::string::npos) {
          return InternalError("the error does not name " + named + ": " + failed.ToString());
        }
        if (e.rank != bad && failed.code() != StatusCode::kAborted) {
          return InternalError("not Aborted: " + failed.ToString());
        }
        // (The other hosts' copies out are queued: done before new inputs.)
        HORA_RETURN_IF_ERROR(t.window->WaitDevice("the copies out"));
        std::vector<float> host(count);
        for (size_t i = 0; i < count; ++i) host[i] = Value(e.rank, 0, i);
        HORA_RETURN_IF_ERROR(
            gpu::CopyHostToDevice(*e.device, mem[0], host.data(), count * 4, kTimeout));
        parts[0] = {mem[0], mem[0], count};
        if (t.window->retired()) return InternalError("the windows were given up");
        HORA_RETURN_IF_ERROR(AllreduceDeviceWindow(*t.comms->tiers().host, *t.window, parts,
                                                   DataType::kFloat32, {}, &t.across));
        HORA_RETURN_IF_ERROR(t.window->WaitDevice("the copies out"));
        HORA_RETURN_IF_ERROR(Check(*e.device, e.rank, e.data->size(), {count}, mem, {}));
        HORA_RETURN_IF_ERROR(e.device->Free(mem[0]));
        return CloseTiers(e, t);
      });
      for (size_t r = 0; r < st.size(); ++r) {
        EXPECT_TRUE(st[r].ok()) << count << " elements, rank " << bad << " failing: rank " << r
                                << ": " << st[r].ToString();
      }
    }
  }
}

// Rank 3's GPU stops (its stream held 2.5 s, its host's waits for the
// device bounded by 1 s) during an allreduce: its wait ends first and its
// step says its device may still be at work. Every rank of both hosts
// fails naming it, and every host gives up its windows alike (none is used
// again; Close leaves them in place).
TEST(HostTiers, AStuckGpuGivesUpTheWindowsOnEveryHost) {
  constexpr int kStuck = 3;
  constexpr size_t kCount = 12000;  // (two steps)
  auto st = OnHosts({2, 2}, [&](const RankEnv& e) -> Status {
    Tiered t;
    std::string why;
    HORA_ASSIGN_OR_RETURN(t.comms, HostTierComms::Find(*e.data, e.selector, &why));
    if (!t.comms) return InternalError("no tiers: " + why);
    const HostTiers& tiers = t.comms->tiers();
    HORA_ASSIGN_OR_RETURN(t.window,
                          DeviceWindow::Open(*tiers.host, e.device, e.stream, kWindowBytes,
                                             std::chrono::seconds(1), true, {}, &why));
    if (!t.window) return InternalError("no window: " + why);
    HORA_ASSIGN_OR_RETURN(t.pinned, e.device->AllocatePinned(t.window->half_bytes()));
    t.across = AcrossHosts{tiers.across, tiers.selector, t.pinned, tiers.world, 0, {}};
    for (gpu::Event& ev : t.across.events) {
      HORA_ASSIGN_OR_RETURN(ev, e.device->CreateEvent());
    }
    std::vector<void*> mem;
    HORA_ASSIGN_OR_RETURN(auto parts, Parts(*e.device, e.rank, {kCount}, &mem));
    if (e.rank == kStuck) {
      auto* host = dynamic_cast<gpu::HostDevice*>(e.device.get());
      HORA_RETURN_IF_ERROR(host->RunOnStream(
          e.stream, [] { std::this_thread::sleep_for(std::chrono::milliseconds(2500)); }));
    }
    const Status failed =
        AllreduceDeviceWindow(*tiers.host, *t.window, parts, DataType::kFloat32, {}, &t.across);
    std::this_thread::sleep_for(std::chrono::seconds(2));  // (the held stream goes on)
    if (failed.ok()) return InternalError("the allreduce went on without rank 3's data");
    if (e.rank != kStuck) {
      const std::string named =
          e.rank / 2 == kStuck / 2 ? "rank 3 failed on its GPU" : "rank 3 of another host failed";
      if (failed.code() != StatusCode::kAborted ||
          failed.message().find(named) == std::string::npos ||
          failed.message().find("the GPU windows are given up") == std::string::npos) {
        return InternalError("not the error meant: " + failed.ToString());
      }
    }
    if (!t.window->retired()) return InternalError("the windows were not given up here");
    const Status closed = t.window->Close(*tiers.host);
    if (closed.ok()) return InternalError("Close freed windows given up");
    (void)e.device->FreePinned(t.pinned);
    for (gpu::Event ev : t.across.events) (void)e.device->DestroyEvent(ev);
    for (void* m : mem) (void)e.device->Free(m);
    return Status::Ok();
  });
  for (size_t r = 0; r < st.size(); ++r) {
    EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
  }
}

}  // namespace
}  // namespace hora
