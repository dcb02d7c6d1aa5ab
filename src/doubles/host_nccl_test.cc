// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The host device's NCCL (host_nccl.h), which the engine's GPU tests run in
// place of the library: ranks as threads, each with its own stream on one
// host device. Its groups take sends and receives in an order that would
// wait for good one call at a time; its collectives give what a reference
// computed here gives; a receive nobody sends ends at the timeout, naming
// both ranks.
#include "doubles/host_nccl.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "doubles/host_device.h"
#include "gpu/blocking_copy.h"

namespace hora {
namespace {

constexpr Duration kTimeout = std::chrono::seconds(20);

// `n` ranks on one host device, each with a communicator and a stream.
class Ranks {
 public:
  explicit Ranks(int n, Duration timeout = kTimeout, std::string_view spec = {}) : n_(n) {
    auto d = gpu::HostDevice::Create(0, size_t{1} << 28);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    device_ = std::move(*d);
    lib_ = std::move(*CreateHostNccl(spec));
    auto id = lib_->UniqueId();
    EXPECT_TRUE(id.ok());
    comms_.resize(static_cast<size_t>(n));
    streams_.resize(static_cast<size_t>(n));
    Each([&](int r) -> Status {
      HORA_ASSIGN_OR_RETURN(streams_[static_cast<size_t>(r)], device_->CreateStream());
      HORA_ASSIGN_OR_RETURN(comms_[static_cast<size_t>(r)],
                            lib_->InitRank(*id, n, r, *device_, timeout));
      return Status::Ok();
    });
  }
  ~Ranks() {
    comms_.clear();
    for (gpu::Stream s : streams_) (void)device_->DestroyStream(s);
  }

  // fn(rank) on a thread per rank; each rank's status.
  std::vector<Status> Each(const std::function<Status(int)>& fn) {
    std::vector<Status> st(static_cast<size_t>(n_));
    std::vector<std::thread> threads;
    for (int r = 0; r < n_; ++r) {
      threads.emplace_back([&, r] { st[static_cast<size_t>(r)] = fn(r); });
    }
    for (auto& t : threads) t.join();
    return st;
  }
  NcclComm& comm(int r) { return *comms_[static_cast<size_t>(r)]; }
  gpu::Stream stream(int r) const { return streams_[static_cast<size_t>(r)]; }
  gpu::Device& device() { return *device_; }

  void* Upload(const std::vector<float>& v) {
    auto p = device_->Allocate(std::max<size_t>(v.size() * 4, 1));
    EXPECT_TRUE(p.ok());
    if (!v.empty()) {
      EXPECT_TRUE(gpu::CopyHostToDevice(*device_, *p, v.data(), v.size() * 4, kTimeout).ok());
    }
    return *p;
  }
  std::vector<float> Download(const void* p, size_t count) {
    std::vector<float> v(count);
    if (count > 0) {
      EXPECT_TRUE(gpu::CopyDeviceToHost(*device_, v.data(), p, count * 4, kTimeout).ok());
    }
    return v;
  }

 private:
  const int n_;
  std::unique_ptr<gpu::HostDevice> device_;
  std::unique_ptr<NcclLibrary> lib_;
  std::vector<std::unique_ptr<NcclComm>> comms_;
  std::vector<gpu::Stream> streams_;
};

// Rank r's values: r * 1000 + i.
std::vector<float> Values(int r, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(r * 1000 + static_cast<int>(i));
  return v;
}

void ExpectAllOk(const std::vector<Status>& st) {
  for (size_t r = 0; r < st.size(); ++r)
    EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
}

// HORA_NCCL_LIBRARY=host:refuse-call=N: the library's Nth call is refused
// (saying so), the others run; anything else after "host" is an error.
TEST(HostNccl, RefusesTheCallItIsToldTo) {
  for (const char* bad : {":refuse-call=0", ":refuse-call=x", ":refuse-call=", ":other"}) {
    Result<std::unique_ptr<NcclLibrary>> lib = CreateHostNccl(bad);
    ASSERT_FALSE(lib.ok()) << bad;
    EXPECT_NE(lib.status().message().find("refuse-call=N"), std::string::npos)
        << lib.status().ToString();
  }
  auto d = gpu::HostDevice::Create(0, size_t{1} << 24);
  ASSERT_TRUE(d.ok());
  Result<std::unique_ptr<NcclLibrary>> lib = CreateHostNccl(":refuse-call=2");
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  auto id = (*lib)->UniqueId();
  ASSERT_TRUE(id.ok());
  auto comm = (*lib)->InitRank(*id, 1, 0, **d, kTimeout);
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  auto stream = (*d)->CreateStream();
  ASSERT_TRUE(stream.ok());
  auto mem = (*d)->Allocate(16);
  ASSERT_TRUE(mem.ok());
  std::vector<Status> got;
  for (int i = 0; i < 3; ++i) {
    got.push_back((*comm)->AllReduce(*mem, *mem, 4, DataType::kFloat32, ReduceOp::kSum, *stream));
  }
  EXPECT_TRUE(got[0].ok()) << got[0].ToString();
  EXPECT_EQ(got[1].code(), StatusCode::kUnavailable);
  EXPECT_NE(got[1].message().find("rank 0 refused its call 2"), std::string::npos)
      << got[1].ToString();
  EXPECT_TRUE(got[2].ok()) << got[2].ToString();
  comm->reset();
  (void)(*d)->Free(*mem);
  (void)(*d)->DestroyStream(*stream);
}

// Every rank receives from every peer before it sends: one call at a time
// no rank would send; as a group, each gets every peer's values.
TEST(HostNccl, AGroupTakesReceivesBeforeSends) {
  for (int n : {2, 3, 4}) {
    Ranks job(n);
    constexpr size_t kCount = 37;
    std::vector<std::vector<float>> got(static_cast<size_t>(n));
    ExpectAllOk(job.Each([&](int r) -> Status {
      void* mine = job.Upload(Values(r, kCount));
      void* all = job.Upload(std::vector<float>(kCount * static_cast<size_t>(n), -1.0f));
      NcclComm& c = job.comm(r);
      HORA_RETURN_IF_ERROR(c.GroupStart());
      for (int q = n - 1; q >= 0; --q) {
        if (q != r) {
          HORA_RETURN_IF_ERROR(
              c.Recv(static_cast<std::byte*>(all) + static_cast<size_t>(q) * kCount * 4, kCount * 4,
                     q, job.stream(r)));
        }
      }
      for (int q = 0; q < n; ++q) {
        if (q != r) HORA_RETURN_IF_ERROR(c.Send(mine, kCount * 4, q, job.stream(r)));
      }
      HORA_RETURN_IF_ERROR(c.GroupEnd());
      got[static_cast<size_t>(r)] = job.Download(all, kCount * static_cast<size_t>(n));
      return Status::Ok();
    }));
    for (int r = 0; r < n; ++r) {
      for (int q = 0; q < n; ++q) {
        const std::vector<float> want =
            q == r ? std::vector<float>(kCount, -1.0f) : Values(q, kCount);
        const auto& g = got[static_cast<size_t>(r)];
        EXPECT_TRUE(
            std::equal(want.begin(), want.end(),
                       g.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(q) * kCount)))
            << "np " << n << ": rank " << r << "'s part from rank " << q;
      }
    }
  }
}

// AllGather, ReduceScatter, and a group of Reduces with uneven parts (one
// to each rank), against sums computed here.
TEST(HostNccl, CollectivesMatchAReference) {
  for (int n : {1, 2, 3}) {
    Ranks job(n);
    const size_t un = static_cast<size_t>(n);
    constexpr size_t kPart = 5;
    std::vector<size_t> uneven(un);
    for (size_t q = 0; q < un; ++q) uneven[q] = q == 1 ? 0 : 3 + q;  // (an empty part too)
    size_t uneven_total = 0;
    for (size_t c : uneven) uneven_total += c;
    auto sum_of = [&](size_t i) {
      float s = 0;
      for (int q = 0; q < n; ++q) s += Values(q, i + 1)[i];
      return s;
    };
    std::vector<Status> st = job.Each([&](int r) -> Status {
      NcclComm& c = job.comm(r);
      const gpu::Stream s = job.stream(r);
      // AllGather.
      void* in = job.Upload(Values(r, kPart));
      void* out = job.Upload(std::vector<float>(kPart * un));
      HORA_RETURN_IF_ERROR(c.AllGather(in, out, kPart * 4, s));
      const std::vector<float> gathered = job.Download(out, kPart * un);
      for (int q = 0; q < n; ++q) {
        const std::vector<float> want = Values(q, kPart);
        if (!std::equal(want.begin(), want.end(), gathered.begin() + q * static_cast<int>(kPart))) {
          return InternalError("allgather: rank " + std::to_string(q) + "'s part differs");
        }
      }
      // ReduceScatter (sum): rank r gets elements [r * kPart, (r + 1) * kPart).
      void* rs_in = job.Upload(Values(r, kPart * un));
      void* rs_out = job.Upload(std::vector<float>(kPart));
      HORA_RETURN_IF_ERROR(
          c.ReduceScatter(rs_in, rs_out, kPart, DataType::kFloat32, ReduceOp::kSum, s));
      const std::vector<float> part = job.Download(rs_out, kPart);
      for (size_t i = 0; i < kPart; ++i) {
        if (part[i] != sum_of(static_cast<size_t>(r) * kPart + i)) {
          return InternalError("reducescatter element " + std::to_string(i) + " is " +
                               std::to_string(part[i]));
        }
      }
      // Reduces of uneven parts, one to each rank, as one group.
      void* red_in = job.Upload(Values(r, uneven_total));
      void* red_out = job.Upload(std::vector<float>(uneven[static_cast<size_t>(r)], -1.0f));
      HORA_RETURN_IF_ERROR(c.GroupStart());
      size_t offset = 0;
      for (int q = 0; q < n; ++q) {
        const size_t count = uneven[static_cast<size_t>(q)];
        if (count > 0) {
          HORA_RETURN_IF_ERROR(c.Reduce(static_cast<const std::byte*>(red_in) + offset * 4,
                                        q == r ? red_out : nullptr, count, DataType::kFloat32,
                                        ReduceOp::kSum, q, s));
        }
        offset += count;
      }
      HORA_RETURN_IF_ERROR(c.GroupEnd());
      size_t first = 0;
      for (int q = 0; q < r; ++q) first += uneven[static_cast<size_t>(q)];
      const std::vector<float> reduced = job.Download(red_out, uneven[static_cast<size_t>(r)]);
      for (size_t i = 0; i < reduced.size(); ++i) {
        const float want = sum_of(first + i);
        if (reduced[i] != want) {
          return InternalError("reduce element " + std::to_string(i) + " is " +
                               std::to_string(reduced[i]) + ", want " + std::to_string(want));
        }
      }
      return Status::Ok();
    });
    for (size_t r = 0; r < st.size(); ++r)
      EXPECT_TRUE(st[r].ok()) << "np " << n << " rank " << r << ": " << st[r].ToString();
  }
}

// A receive that nobody sends ends at the timeout, naming both ranks, and
// the communicator says it failed; a group that never started cannot end.
TEST(HostNccl, AReceiveNobodySendsTimesOutNamingTheRanks) {
  Ranks job(2, std::chrono::milliseconds(300));
  std::vector<Status> st = job.Each([&](int r) -> Status {
    if (r == 0) return Status::Ok();
    void* out = job.Upload(std::vector<float>(4));
    return job.comm(r).Recv(out, 16, 0, job.stream(r));
  });
  EXPECT_TRUE(st[0].ok());
  EXPECT_EQ(st[1].code(), StatusCode::kTimeout) << st[1].ToString();
  EXPECT_NE(st[1].message().find("rank 1 timed out waiting for what rank 0 sends"),
            std::string::npos)
      << st[1].ToString();
  EXPECT_FALSE(job.comm(0).AsyncError().ok());
  EXPECT_EQ(job.comm(0).GroupEnd().code(), StatusCode::kInvalidArgument);
}

// ":queued": a call returns before the other ranks made theirs, its work
// waiting on its stream as NCCL's kernels do; an abort ends only the
// aborting rank's calls (the others' wait on until they abort), and ends
// them without their results.
TEST(HostNccl, QueuedCallsWaitOnTheirStreamAndAnAbortEndsOnlyItsRanks) {
  Ranks job(2, kTimeout, ":queued");
  gpu::Device& dev = job.device();
  void* a0 = job.Upload({1, 2});
  void* a1 = job.Upload({10, 20});
  gpu::Event e0 = dev.CreateEvent().value(), e1 = dev.CreateEvent().value();
  ASSERT_TRUE(
      job.comm(0).AllReduce(a0, a0, 2, DataType::kFloat32, ReduceOp::kSum, job.stream(0)).ok());
  ASSERT_TRUE(dev.Record(e0, job.stream(0)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(dev.Query(e0).value());  // (waiting for rank 1's call)
  ASSERT_TRUE(
      job.comm(1).AllReduce(a1, a1, 2, DataType::kFloat32, ReduceOp::kSum, job.stream(1)).ok());
  ASSERT_TRUE(dev.Record(e1, job.stream(1)).ok());
  EXPECT_TRUE(dev.Wait(e0, Clock::now() + kTimeout).ok());
  EXPECT_TRUE(dev.Wait(e1, Clock::now() + kTimeout).ok());
  EXPECT_EQ(job.Download(a0, 2), (std::vector<float>{11, 22}));
  EXPECT_EQ(job.Download(a1, 2), (std::vector<float>{11, 22}));

  ASSERT_TRUE(
      job.comm(0).AllReduce(a0, a0, 2, DataType::kFloat32, ReduceOp::kSum, job.stream(0)).ok());
  ASSERT_TRUE(dev.Record(e0, job.stream(0)).ok());
  job.comm(1).Abort();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(dev.Query(e0).value());  // rank 1's abort does not end rank 0's call
  EXPECT_TRUE(job.comm(0).AsyncError().ok());
  EXPECT_FALSE(job.comm(1).AsyncError().ok());
  job.comm(0).Abort();
  EXPECT_TRUE(dev.Wait(e0, Clock::now() + kTimeout).ok());
  EXPECT_FALSE(job.comm(0).AsyncError().ok());
  EXPECT_EQ(job.Download(a0, 2), (std::vector<float>{11, 22}));  // no result written
  EXPECT_TRUE(dev.DestroyEvent(e0).ok());
  EXPECT_TRUE(dev.DestroyEvent(e1).ok());
  EXPECT_TRUE(dev.Free(a0).ok());
  EXPECT_TRUE(dev.Free(a1).ok());
}

TEST(HostNccl, ItsSpecTakesQueuedNetAndARefusalInAnyOrder) {
  for (const char* good : {":queued", ":net", ":queued:refuse-call=2", ":refuse-call=2:queued",
                           ":queued:net", ":net:refuse-call=3:queued"}) {
    EXPECT_TRUE(CreateHostNccl(good).ok()) << good;
  }
  for (const char* bad :
       {":queued:queued", ":net:net", ":refuse-call=0", ":refuse-call=2x", ":bogus", "x"}) {
    const auto lib = CreateHostNccl(bad);
    EXPECT_FALSE(lib.ok()) << bad;
    if (!lib.ok()) {
      EXPECT_NE(lib.status().message().find(":queued\", \":net\""), std::string::npos)
          << lib.status().ToString();
    }
  }
}

}  // namespace
}  // namespace hora
