// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The Device contract (device.h) on the host device: memory, copies, stream
// order, events and their snapshot rule, bounded waits, kernels against the
// CPU's, and the errors of bad pointers.
#include "doubles/host_device.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "kernels/reduce.h"

namespace hora::gpu {
namespace {

using std::chrono::milliseconds;

std::unique_ptr<HostDevice> NewDevice() {
  auto d = HostDevice::Create(0, size_t{1} << 30);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return std::move(d).value();
}

// Host memory the device copies to and from, freed with it.
struct Pinned {
  Pinned(Device& d, size_t bytes)
      : d(d), p(static_cast<std::byte*>(d.AllocatePinned(bytes).value())) {}
  ~Pinned() { EXPECT_TRUE(d.FreePinned(p).ok()); }
  Device& d;
  std::byte* p;
};

class HostDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dev_ = NewDevice();
    stream_ = dev_->CreateStream().value();
    done_ = dev_->CreateEvent().value();
  }
  // Waits for everything queued on stream_ so far.
  void Sync() {
    ASSERT_TRUE(dev_->Record(done_, stream_).ok());
    ASSERT_TRUE(dev_->Wait(done_, Clock::now() + std::chrono::seconds(10)).ok());
  }
  void Upload(void* dst, const void* src, size_t bytes) {
    Pinned staging(*dev_, bytes);
    std::memcpy(staging.p, src, bytes);
    ASSERT_TRUE(dev_->Copy(dst, staging.p, bytes, CopyKind::kHostToDevice, stream_).ok());
    Sync();
  }
  std::vector<std::byte> Download(const void* src, size_t bytes) {
    Pinned staging(*dev_, bytes);
    EXPECT_TRUE(dev_->Copy(staging.p, src, bytes, CopyKind::kDeviceToHost, stream_).ok());
    Sync();
    return std::vector<std::byte>(staging.p, staging.p + bytes);
  }

  std::unique_ptr<HostDevice> dev_;
  Stream stream_;
  Event done_;
};

TEST_F(HostDeviceTest, AllocationsAreAlignedDistinctAndKnownToQueryPointer) {
  std::vector<void*> got;
  for (size_t bytes : {0, 1, 255, 256, 4097, 1 << 20}) {
    void* p = dev_->Allocate(bytes).value();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u) << bytes;
    for (void* q : got) EXPECT_NE(p, q);
    got.push_back(p);
    const PointerInfo info = dev_->QueryPointer(p).value();
    EXPECT_EQ(info.kind, MemoryKind::kDevice);
    EXPECT_EQ(info.base, reinterpret_cast<uintptr_t>(p));
    EXPECT_EQ(info.size, bytes);
    if (bytes > 2) {
      // An interior pointer belongs to the same allocation.
      const PointerInfo inner = dev_->QueryPointer(static_cast<char*>(p) + bytes / 2).value();
      EXPECT_EQ(inner.base, info.base);
      EXPECT_EQ(inner.buffer_id, info.buffer_id);
    }
  }
  int local = 0;
  EXPECT_EQ(dev_->QueryPointer(&local).value().kind, MemoryKind::kHost);
  Pinned pinned(*dev_, 100);
  EXPECT_EQ(dev_->QueryPointer(pinned.p + 99).value().kind, MemoryKind::kPinned);
  for (void* p : got) EXPECT_TRUE(dev_->Free(p).ok());
}

TEST_F(HostDeviceTest, MemoryFreedAndAllocatedAgainHasANewBufferId) {
  void* a = dev_->Allocate(4096).value();
  const uint64_t id = dev_->QueryPointer(a).value().buffer_id;
  ASSERT_TRUE(dev_->Free(a).ok());
  void* b = dev_->Allocate(4096).value();
  EXPECT_EQ(a, b);  // the freed range is reused first, as CUDA's allocator often does
  EXPECT_NE(dev_->QueryPointer(b).value().buffer_id, id);
  EXPECT_TRUE(dev_->Free(b).ok());
}

TEST_F(HostDeviceTest, FreeOfWhatWasNotAllocatedIsAnError) {
  int local = 0;
  const Status st = dev_->Free(&local);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("not the start of a device allocation"), std::string::npos);
  void* p = dev_->Allocate(512).value();
  EXPECT_FALSE(dev_->Free(static_cast<char*>(p) + 256).ok());
  EXPECT_TRUE(dev_->Free(p).ok());
  EXPECT_FALSE(dev_->Free(p).ok());  // twice
}

TEST_F(HostDeviceTest, HostCodeThatTouchesDeviceMemoryFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  void* p = dev_->Allocate(64).value();
  EXPECT_DEATH({ *static_cast<volatile char*>(p) = 1; }, "");
  EXPECT_TRUE(dev_->Free(p).ok());
}

TEST_F(HostDeviceTest, CopiesRoundTripThroughPinnedMemoryOnly) {
  constexpr size_t kBytes = 10007;
  std::vector<std::byte> data(kBytes);
  for (size_t i = 0; i < kBytes; ++i) data[i] = static_cast<std::byte>(i * 7 + 1);
  void* a = dev_->Allocate(kBytes).value();
  void* b = dev_->Allocate(kBytes).value();
  Upload(a, data.data(), kBytes);
  ASSERT_TRUE(dev_->Copy(b, a, kBytes, CopyKind::kDeviceToDevice, stream_).ok());
  EXPECT_EQ(Download(b, kBytes), data);

  // Pageable host memory: refused, naming the side and the rule.
  const Status st = dev_->Copy(a, data.data(), kBytes, CopyKind::kHostToDevice, stream_);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("source"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("not pinned"), std::string::npos) << st.message();
  EXPECT_FALSE(dev_->Copy(data.data(), a, kBytes, CopyKind::kDeviceToHost, stream_).ok());
  // Past the end of the allocation, or not device memory at all.
  Pinned pinned(*dev_, kBytes + 1);
  const Status over = dev_->Copy(a, pinned.p, kBytes + 1, CopyKind::kHostToDevice, stream_);
  EXPECT_NE(over.message().find("not inside one device allocation"), std::string::npos)
      << over.message();
  EXPECT_FALSE(dev_->Copy(pinned.p, pinned.p, 8, CopyKind::kDeviceToDevice, stream_).ok());
  EXPECT_TRUE(dev_->Free(a).ok());
  EXPECT_TRUE(dev_->Free(b).ok());
}

TEST_F(HostDeviceTest, FreshMemoryIsPoisonedAndMemsetSetsIt) {
  void* a = dev_->Allocate(300).value();
  for (std::byte b : Download(a, 300)) ASSERT_EQ(b, std::byte{0xA5});
  ASSERT_TRUE(dev_->Memset(a, 0x3C, 300, stream_).ok());
  for (std::byte b : Download(a, 300)) ASSERT_EQ(b, std::byte{0x3C});
  EXPECT_TRUE(dev_->Free(a).ok());
}

TEST_F(HostDeviceTest, BatchedCopyMovesEveryPart) {
  void* src = dev_->Allocate(1000).value();
  void* dst = dev_->Allocate(1000).value();
  std::vector<std::byte> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i % 251);
  Upload(src, data.data(), data.size());
  ASSERT_TRUE(dev_->Memset(dst, 0, 1000, stream_).ok());
  auto* s = static_cast<std::byte*>(src);
  auto* d = static_cast<std::byte*>(dst);
  // Three parts, reversed in order and size-odd, one empty.
  const std::vector<CopyPart> parts = {{d, s + 700, 300}, {d + 300, s + 3, 397}, {d + 697, s, 0}};
  ASSERT_TRUE(dev_->BatchedCopy(parts, stream_).ok());
  const std::vector<std::byte> got = Download(dst, 1000);
  for (size_t i = 0; i < 300; ++i) ASSERT_EQ(got[i], data[700 + i]) << i;
  for (size_t i = 0; i < 397; ++i) ASSERT_EQ(got[300 + i], data[3 + i]) << i;
  for (size_t i = 697; i < 1000; ++i) ASSERT_EQ(got[i], std::byte{0}) << i;
  const std::vector<CopyPart> bad = {{d, s, 10}, {d, s + 999, 2}};
  const Status st = dev_->BatchedCopy(bad, stream_);
  EXPECT_NE(st.message().find("part 1"), std::string::npos) << st.message();
  EXPECT_TRUE(dev_->Free(src).ok());
  EXPECT_TRUE(dev_->Free(dst).ok());
}

TEST_F(HostDeviceTest, EventsCompleteInStreamOrderAndWaitsAreBounded) {
  Event e = dev_->CreateEvent().value();
  EXPECT_TRUE(dev_->Query(e).value());  // never recorded: complete
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  ASSERT_TRUE(dev_->RunOnStream(stream_, [gate] { gate.wait(); }).ok());
  ASSERT_TRUE(dev_->Record(e, stream_).ok());
  EXPECT_FALSE(dev_->Query(e).value());
  const Status st = dev_->Wait(e, Clock::now() + milliseconds(50));
  EXPECT_EQ(st.code(), StatusCode::kTimeout) << st.ToString();
  go.set_value();
  EXPECT_TRUE(dev_->Wait(e, Clock::now() + std::chrono::seconds(10)).ok());
  EXPECT_TRUE(dev_->Query(e).value());
  EXPECT_TRUE(dev_->DestroyEvent(e).ok());
  EXPECT_FALSE(dev_->Query(e).ok());
}

// An injected fault (FaultNextDeviceCopy) comes when the copy runs, after
// its call returned, and breaks the device as CUDA's sticky errors do: the
// copy and the work after it do nothing, and every later call that queues
// work, waits or queries fails with the fault.
TEST_F(HostDeviceTest, AFaultOfQueuedWorkBreaksTheDeviceForGood) {
  const std::vector<std::byte> ones(64, std::byte{1}), twos(64, std::byte{2});
  void* a = dev_->Allocate(64).value();
  void* b = dev_->Allocate(64).value();
  Upload(a, ones.data(), 64);
  Upload(b, twos.data(), 64);
  // Host-to-device copies are not armed: the next device-to-device one is.
  dev_->FaultNextDeviceCopy();
  Upload(b, twos.data(), 64);
  EXPECT_EQ(Download(b, 64), twos);
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  ASSERT_TRUE(dev_->RunOnStream(stream_, [gate] { gate.wait(); }).ok());
  ASSERT_TRUE(dev_->Copy(b, a, 64, CopyKind::kDeviceToDevice, stream_).ok());
  std::atomic<bool> ran{false};
  ASSERT_TRUE(dev_->RunOnStream(stream_, [&ran] { ran = true; }).ok());
  ASSERT_TRUE(dev_->Record(done_, stream_).ok());
  EXPECT_FALSE(dev_->Query(done_).value());  // (queued, not run: no fault yet)
  go.set_value();
  const Status waited = dev_->Wait(done_, Clock::now() + std::chrono::seconds(10));
  EXPECT_EQ(waited.code(), StatusCode::kInternal) << waited.ToString();
  EXPECT_NE(waited.message().find("faulted"), std::string::npos) << waited.ToString();
  EXPECT_FALSE(ran);
  EXPECT_FALSE(dev_->Query(done_).ok());
  EXPECT_FALSE(dev_->Record(done_, stream_).ok());
  Pinned host(*dev_, 64);
  EXPECT_FALSE(dev_->Copy(host.p, b, 64, CopyKind::kDeviceToHost, stream_).ok());
  EXPECT_FALSE(dev_->Scale(DataType::kFloat32, 2.0, a, a, 16, stream_).ok());
  EXPECT_TRUE(dev_->Free(a).ok());
  EXPECT_TRUE(dev_->Free(b).ok());
}

TEST_F(HostDeviceTest, StreamWaitWaitsForTheRecordCurrentWhenCalled) {
  Stream other = dev_->CreateStream().value();
  Event e = dev_->CreateEvent().value();
  Event f = dev_->CreateEvent().value();
  void* buf = dev_->Allocate(64).value();
  // Another stream's work becomes visible through StreamWait only.
  ASSERT_TRUE(dev_->Memset(buf, 1, 64, other).ok());
  ASSERT_TRUE(dev_->Record(e, other).ok());
  ASSERT_TRUE(dev_->StreamWait(stream_, e).ok());
  for (std::byte b : Download(buf, 64)) ASSERT_EQ(b, std::byte{1});
  // A wait queued now binds to the record current now (done), not to the
  // one the other stream makes later, behind a gate that stays shut.
  ASSERT_TRUE(dev_->StreamWait(stream_, e).ok());
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  ASSERT_TRUE(dev_->RunOnStream(other, [gate] { gate.wait(); }).ok());
  ASSERT_TRUE(dev_->Record(e, other).ok());
  ASSERT_TRUE(dev_->Memset(buf, 2, 64, stream_).ok());
  ASSERT_TRUE(dev_->Record(f, stream_).ok());
  EXPECT_TRUE(dev_->Wait(f, Clock::now() + std::chrono::seconds(10)).ok());
  // A wait queued after the second record waits for it.
  ASSERT_TRUE(dev_->StreamWait(stream_, e).ok());
  ASSERT_TRUE(dev_->Record(f, stream_).ok());
  EXPECT_EQ(dev_->Wait(f, Clock::now() + milliseconds(50)).code(), StatusCode::kTimeout);
  go.set_value();
  EXPECT_TRUE(dev_->Wait(f, Clock::now() + std::chrono::seconds(10)).ok());
  EXPECT_TRUE(dev_->Free(buf).ok());
  EXPECT_TRUE(dev_->DestroyStream(other).ok());
}

// Random values of `dtype`: small integers (exact sums) and, for floating
// types, signed fractions with some NaN, infinities and signed zeros.
std::vector<std::byte> Values(DataType dtype, size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(count * DataTypeSize(dtype));
  for (auto& b : out) b = static_cast<std::byte>(rng());
  if (dtype == DataType::kBool) {
    for (auto& b : out) b = static_cast<std::byte>(rng() % 2);
  }
  return out;
}

TEST_F(HostDeviceTest, KernelsMatchTheCpuKernelsBitForBit) {
  constexpr size_t kCount = 5001;  // odd, over one 16 KiB chunk for every dtype
  for (DataType dtype : kAllDataTypes) {
    const size_t bytes = kCount * DataTypeSize(dtype);
    std::vector<std::vector<std::byte>> in;
    std::vector<void*> dev_in;
    for (uint32_t k = 0; k < 3; ++k) {
      in.push_back(Values(dtype, kCount, 17 * k + static_cast<uint32_t>(dtype)));
      dev_in.push_back(dev_->Allocate(bytes).value());
      Upload(dev_in.back(), in.back().data(), bytes);
    }
    void* out = dev_->Allocate(bytes).value();
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      std::vector<std::byte> want = in[0];
      kernels::Reduce(dtype, op, want.data(), in[1].data(), kCount);
      kernels::Reduce(dtype, op, want.data(), in[2].data(), kCount);
      const std::vector<const void*> srcs(dev_in.begin(), dev_in.end());
      ASSERT_TRUE(dev_->Reduce(dtype, op, out, srcs, kCount, stream_).ok());
      EXPECT_EQ(Download(out, bytes), want) << DataTypeName(dtype) << " " << ReduceOpName(op);
    }
    // The destination may be a source: here the last one.
    {
      std::vector<std::byte> want = in[0];
      kernels::Reduce(dtype, ReduceOp::kSum, want.data(), in[1].data(), kCount);
      kernels::Reduce(dtype, ReduceOp::kSum, want.data(), in[2].data(), kCount);
      const std::vector<const void*> srcs(dev_in.begin(), dev_in.end());
      ASSERT_TRUE(dev_->Reduce(dtype, ReduceOp::kSum, dev_in[2], srcs, kCount, stream_).ok());
      EXPECT_EQ(Download(dev_in[2], bytes), want) << DataTypeName(dtype) << " aliased";
      Upload(dev_in[2], in[2].data(), bytes);
    }
    if (dtype != DataType::kBool) {
      std::vector<std::byte> want(bytes);
      kernels::Scale(dtype, 0.37, want.data(), in[0].data(), kCount);
      ASSERT_TRUE(dev_->Scale(dtype, 0.37, out, dev_in[0], kCount, stream_).ok());
      EXPECT_EQ(Download(out, bytes), want) << DataTypeName(dtype) << " scale";
      want = in[1];
      kernels::Finalize(dtype, ReduceOp::kAverage, 3, 2.5, want.data(), kCount);
      ASSERT_TRUE(
          dev_->Finalize(dtype, ReduceOp::kAverage, 3, 2.5, dev_in[1], kCount, stream_).ok());
      EXPECT_EQ(Download(dev_in[1], bytes), want) << DataTypeName(dtype) << " finalize";
    }
    for (void* p : dev_in) EXPECT_TRUE(dev_->Free(p).ok());
    EXPECT_TRUE(dev_->Free(out).ok());
  }
}

TEST_F(HostDeviceTest, ReduceOfSmallIntegersSumsExactly) {
  // An independent check of the fold: 1 + 2 + 3 per element, as float32.
  constexpr size_t kCount = 7;
  std::vector<void*> bufs;
  for (float v : {1.0f, 2.0f, 3.0f}) {
    std::vector<float> host(kCount, v);
    bufs.push_back(dev_->Allocate(kCount * 4).value());
    Upload(bufs.back(), host.data(), kCount * 4);
  }
  const std::vector<const void*> srcs(bufs.begin(), bufs.end());
  ASSERT_TRUE(
      dev_->Reduce(DataType::kFloat32, ReduceOp::kSum, bufs[0], srcs, kCount, stream_).ok());
  std::vector<float> got(kCount);
  std::memcpy(got.data(), Download(bufs[0], kCount * 4).data(), kCount * 4);
  for (float g : got) EXPECT_EQ(g, 6.0f);
  EXPECT_EQ(
      dev_->Reduce(DataType::kFloat32, ReduceOp::kAverage, bufs[0], srcs, kCount, stream_).code(),
      StatusCode::kInvalidArgument);
  for (void* p : bufs) EXPECT_TRUE(dev_->Free(p).ok());
}

// IPC between two host devices (here in one process; tests/mp/device_worker
// does it between processes): the importer sees the exporter's bytes at an
// address of its own, at the same offset within a page, writes reach the
// exporter, and closing gives the addresses back.
TEST_F(HostDeviceTest, MemoryOpenedFromAHandleIsTheExportersMemory) {
  std::unique_ptr<HostDevice> other = NewDevice();
  const Stream os = other->CreateStream().value();
  const Event oe = other->CreateEvent().value();
  // Not at a page boundary in the exporter: a small allocation first.
  void* pad = dev_->Allocate(300).value();
  constexpr size_t kBytes = 10000;
  void* mine = dev_->Allocate(kBytes).value();
  std::vector<std::byte> pattern(kBytes);
  for (size_t i = 0; i < kBytes; ++i) pattern[i] = static_cast<std::byte>(i * 7 + 3);
  Upload(mine, pattern.data(), kBytes);
  Result<IpcMemHandle> h = dev_->ExportMemory(mine);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  Result<void*> theirs = other->OpenMemory(*h);
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*theirs) % 4096, reinterpret_cast<uintptr_t>(mine) % 4096);
  const PointerInfo info = other->QueryPointer(*theirs).value();
  EXPECT_EQ(info.kind, MemoryKind::kDevice);
  EXPECT_EQ(info.size, kBytes);
  // The importer reads the bytes, and writes some back.
  Pinned staging(*other, kBytes);
  auto sync_other = [&] {
    ASSERT_TRUE(other->Record(oe, os).ok());
    ASSERT_TRUE(other->Wait(oe, Clock::now() + std::chrono::seconds(10)).ok());
  };
  ASSERT_TRUE(other->Copy(staging.p, *theirs, kBytes, CopyKind::kDeviceToHost, os).ok());
  sync_other();
  EXPECT_EQ(std::memcmp(staging.p, pattern.data(), kBytes), 0);
  std::memset(staging.p, 0x5C, 64);
  ASSERT_TRUE(
      other
          ->Copy(static_cast<std::byte*>(*theirs) + 100, staging.p, 64, CopyKind::kHostToDevice, os)
          .ok());
  sync_other();
  std::vector<std::byte> want = pattern;
  std::memset(want.data() + 100, 0x5C, 64);
  EXPECT_EQ(Download(mine, kBytes), want);
  // Past its end, and after closing, the importer refuses the range.
  EXPECT_FALSE(other->Copy(staging.p, *theirs, kBytes + 1, CopyKind::kDeviceToHost, os).ok());
  ASSERT_TRUE(other->CloseMemory(*theirs).ok());
  EXPECT_FALSE(other->Copy(staging.p, *theirs, 8, CopyKind::kDeviceToHost, os).ok());
  // The exporter's memory is untouched by the close.
  EXPECT_EQ(Download(mine, kBytes), want);
  ASSERT_TRUE(other->DestroyEvent(oe).ok());
  ASSERT_TRUE(other->DestroyStream(os).ok());
  ASSERT_TRUE(dev_->Free(mine).ok());
  ASSERT_TRUE(dev_->Free(pad).ok());
}

TEST_F(HostDeviceTest, IpcMisuseIsRefusedByName) {
  std::unique_ptr<HostDevice> other = NewDevice();
  void* mine = dev_->Allocate(4096).value();
  // Not the start of an allocation.
  Result<IpcMemHandle> h = dev_->ExportMemory(static_cast<std::byte*>(mine) + 8);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("not the start of a device allocation"), std::string::npos)
      << h.status().ToString();
  h = dev_->ExportMemory(mine);
  ASSERT_TRUE(h.ok());
  // Its own memory, from its handle.
  Result<void*> own = dev_->OpenMemory(*h);
  ASSERT_FALSE(own.ok());
  EXPECT_NE(own.status().message().find("this device's own memory"), std::string::npos)
      << own.status().ToString();
  // A handle of nothing.
  Result<void*> junk = other->OpenMemory(IpcMemHandle{});
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.status().message().find("no host device exported"), std::string::npos);
  // Opened memory is closed, not freed, and not exported again; only
  // opened memory is closed.
  void* theirs = other->OpenMemory(*h).value();
  Status st = other->Free(theirs);
  EXPECT_NE(st.message().find("close it (CloseMemory)"), std::string::npos) << st.ToString();
  EXPECT_FALSE(other->ExportMemory(theirs).ok());
  st = dev_->CloseMemory(mine);
  EXPECT_NE(st.message().find("not opened from a handle"), std::string::npos) << st.ToString();
  EXPECT_TRUE(other->CloseMemory(theirs).ok());
  EXPECT_TRUE(dev_->Free(mine).ok());
}

// Threads sharing one device (ranks as threads on one GPU): a free, which
// waits for every stream, while another thread makes and destroys streams.
// (Before streams were held while drained, a stream destroyed meanwhile was
// used after its end: ASan and valgrind saw it.)
TEST_F(HostDeviceTest, AFreeWhileAnotherThreadDestroysItsStreamsIsSafe) {
  std::atomic<bool> stop{false};
  std::atomic<int> made{0};
  std::thread churn([&] {
    for (; !stop.load(); made.fetch_add(1)) {
      auto s = dev_->CreateStream();
      ASSERT_TRUE(s.ok());
      void* p = dev_->Allocate(64).value();
      ASSERT_TRUE(dev_->Memset(p, 0, 64, *s).ok());
      ASSERT_TRUE(dev_->DestroyStream(*s).ok());
      ASSERT_TRUE(dev_->Free(p).ok());
    }
  });
  const TimePoint until = Clock::now() + std::chrono::seconds(5);
  for (int i = 0; (i < 2000 || made.load() < 500) && Clock::now() < until; ++i) {
    void* p = dev_->Allocate(256).value();
    ASSERT_TRUE(dev_->Free(p).ok());
  }
  stop.store(true);
  churn.join();
}

}  // namespace
}  // namespace hora::gpu
