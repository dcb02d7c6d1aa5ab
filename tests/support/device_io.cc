// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "support/device_io.h"

#include <cstdio>
#include <cstdlib>

#include "api/session_impl.h"
#include "gpu/blocking_copy.h"

namespace hora::testing {
namespace {

constexpr Duration kCopyTimeout = std::chrono::seconds(30);

// A test helper's own failure: the test cannot go on.
void Require(const Status& st, const char* what) {
  if (st.ok()) return;
  std::fprintf(stderr, "DeviceIo: %s: %s\n", what, st.ToString().c_str());
  std::abort();
}

}  // namespace

DeviceIo::DeviceIo(Session& s) {
  auto dev = s.impl().devices.Get(0);
  if (!dev.ok()) {
    error_ = dev.status();
    return;
  }
  device_ = *dev;
}

DeviceIo::~DeviceIo() {
  for (void* p : owned_) Require(device_->Free(p), "Free");
}

void* DeviceIo::Upload(const void* host, size_t bytes) {
  Result<void*> d = device_->Allocate(bytes);
  Require(d.status(), "Allocate");
  owned_.push_back(*d);
  if (host != nullptr) {
    Require(gpu::CopyHostToDevice(*device_, *d, host, bytes, kCopyTimeout), "CopyHostToDevice");
  }
  return *d;
}

std::vector<uint8_t> DeviceIo::Download(const void* device_memory, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  Require(gpu::CopyDeviceToHost(*device_, out.data(), device_memory, bytes, kCopyTimeout),
          "CopyDeviceToHost");
  return out;
}

TensorView OnGpu(void* p, DataType dtype, std::vector<int64_t> shape) {
  return TensorView(p, dtype, std::move(shape), {DeviceType::kCUDA, 0});
}

}  // namespace hora::testing
