// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// DeviceDone's errors name the batch (device_done.h), put into words only
// when one is made: here, a handle handed to a stream the device does not
// know. The GPU is the host device.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace hora::testing
