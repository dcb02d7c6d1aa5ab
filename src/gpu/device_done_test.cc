// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// DeviceDone's errors name the batch (device_done.h), put into words only
// when one is made: here, a handle handed to a stream the device does not
// know. The GPU is the host device.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "doubles/host_device.h"
#include "gpu/device_done.h"
#include "support/device_io.h"
#include "support/thread_ranks.h"

namespace hora::testing {
namespace {

TEST(DeviceDone, AnErrorNamesTheBatchTheRankAndTheDevice) {
  // A group of three GPU tensors, one batch: the error of handing it to
  // stream 999 names its first tensor, the two others, the rank and the GPU.
  ThreadRanks job(1, TestSettings({{"HORA_DEVICE", "host"}, {"HORA_GPU_IPC", "0"}}));
  ExpectAllOk(job.Run([&](int, Session& s) -> Status {
    DeviceIo io(s);
    if (!io.ok()) return io.error();
    constexpr size_t kCount = 33;
    const std::vector<float> host(kCount, 1.0f);
    std::vector<TensorView> views;
    for (int i = 0; i < 3; ++i) {
      views.push_back(OnGpu(io.Upload(host.data(), kCount * 4), DataType::kFloat32, {kCount}));
    }
    std::vector<Handle> hs = s.GroupedAllreduceAsync("g", views, views);
    const Status st = hs.front().StreamWait(999, std::chrono::seconds(60));
    for (Handle& h : hs) HORA_RETURN_IF_ERROR(h.Wait(std::chrono::seconds(60)));
    const std::string want =
        "making stream 999 wait for the results, allreduce 'g.0' (and 2 more), rank 0 on host "
        "device 0 (cuda:0)";
    if (st.ok() || st.message().find(want) == std::string::npos) {
      return InternalError("want \"" + want + "\" in: " + st.ToString());
    }
    return Status::Ok();
  }));
}

// An NCCL communicator aborted under a batch's kernels ends them without
// their results: the batches not yet done fail from then on, and a batch
// already done keeps its result.
TEST(DeviceDone, WorkCutShortFailsOnlyWhereTheDeviceHadNotGotThere) {
  auto created = gpu::HostDevice::Create(0, size_t{1} << 20);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::shared_ptr<gpu::HostDevice> dev(std::move(*created));
  auto stream = dev->CreateStream();
  ASSERT_TRUE(stream.ok());
  auto pool = std::make_shared<DoneEvents>(dev);
  auto done_event = pool->Take();
  ASSERT_TRUE(done_event.ok());
  auto done =
      std::make_shared<DeviceDone>(pool, *done_event, DeviceDone::Batch{"allreduce", "a", 0, 2});
  ASSERT_TRUE(dev->Record(*done_event, *stream).ok());
  ASSERT_TRUE(done->Wait(DeadlineAfter(Clock::now(), std::chrono::seconds(30))).ok());
  ASSERT_TRUE(
      dev->RunOnStream(*stream, [] { std::this_thread::sleep_for(std::chrono::seconds(1)); }).ok());
  auto held_event = pool->Take();
  ASSERT_TRUE(held_event.ok());
  auto held =
      std::make_shared<DeviceDone>(pool, *held_event, DeviceDone::Batch{"allreduce", "b", 0, 2});
  ASSERT_TRUE(dev->Record(*held_event, *stream).ok());
  const Status cut = AbortedError("its NCCL work was cut short");
  done->FailIfPending(cut);
  held->FailIfPending(cut);
  EXPECT_TRUE(done->Wait(DeadlineAfter(Clock::now(), std::chrono::seconds(30))).ok());
  const Status st = held->Wait(DeadlineAfter(Clock::now(), std::chrono::seconds(30)));
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_NE(st.message().find("allreduce 'b', rank 2 on host device 0"), std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find("its NCCL work was cut short"), std::string::npos) << st.ToString();
  EXPECT_TRUE(held->Reached()) << "settled: it is not waited for again";
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // (the held stream ends)
  EXPECT_EQ(held->Wait(DeadlineAfter(Clock::now(), std::chrono::seconds(1))).code(),
            StatusCode::kAborted)
      << "the event's end afterwards does not undo it";
  ASSERT_TRUE(dev->DestroyStream(*stream).ok());
}

}  // namespace
}  // namespace hora::testing
