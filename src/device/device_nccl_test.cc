// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// DeviceNccl's calls where it has no communicator (never made here; in the
// engine, aborted after Ready by a wait for the device that found a peer
// lost: device_staging.h): each fails, and none reaches NCCL (before, each
// dereferenced the missing communicator).
#include "device/device_nccl.h"

#include <gtest/gtest.h>

#include "backends/device_choice.h"
#include "doubles/host_device.h"
#include "engine/allocated_outputs.h"

namespace hora {
namespace {

TEST(DeviceNccl, CallsWithoutACommunicatorFailAndReachNoLibrary) {
  Result<std::unique_ptr<gpu::HostDevice>> made = gpu::HostDevice::Create(0, size_t{1} << 20);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::shared_ptr<gpu::Device> device = std::move(made).value();
  Result<gpu::Stream> stream = device->CreateStream();
  ASSERT_TRUE(stream.ok());
  Result<void*> mem = device->Allocate(64);
  ASSERT_TRUE(mem.ok());
  {
    DeviceNccl::Settings settings;
    settings.nccl = ChooseNccl("host:queued");
    DeviceNccl nccl(device, *stream, std::chrono::seconds(5), settings);
    RequestMeta m;
    m.op = OpType::kAllreduce;
    m.dtype = DataType::kFloat32;
    m.shape = {16};
    ShapedPlan plan;  // (two ranks, 32 bytes each)
    plan.send = plan.recv = {32, 32};
    plan.counts = {8, 8};
    const std::vector<Status> got{nccl.Allreduce(*mem, 16, m, 2), nccl.Broadcast(*mem, 64, 0),
                                  nccl.Allgather(*mem, *mem, plan, 0),
                                  nccl.Alltoall(*mem, *mem, plan, 0),
                                  nccl.Reducescatter(*mem, *mem, plan, m, 0, 2)};
    for (const Status& st : got) {
      EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
      EXPECT_NE(st.message().find("the NCCL communicator is gone"), std::string::npos)
          << st.ToString();
    }
  }
  EXPECT_TRUE(device->Free(*mem).ok());
  EXPECT_TRUE(device->DestroyStream(*stream).ok());
}

}  // namespace
}  // namespace hora
