// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Tests' way to a Session's GPU (the host device under HORA_DEVICE=host):
// device memory filled from host bytes and read back, each copy waited for
// (at most 30 s; gpu/blocking_copy.h).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "gpu/device.h"
#include "hora/hora.h"

namespace hora::testing {

class DeviceIo {
 public:
  // The device of `s` (cuda:0, opened if need be); ok() is false, and
  // error() says why, when there is none.
  explicit DeviceIo(Session& s);
  ~DeviceIo();  // frees what Upload allocated
  DeviceIo(const DeviceIo&) = delete;
  DeviceIo& operator=(const DeviceIo&) = delete;

  bool ok() const { return device_ != nullptr; }
  gpu::Device& device() const { return *device_; }
  const Status& error() const { return error_; }

  // New device memory holding `bytes` of `host` (unset when null).
  void* Upload(const void* host, size_t bytes);
  std::vector<uint8_t> Download(const void* device_memory, size_t bytes);

 private:
  std::shared_ptr<gpu::Device> device_;
  Status error_;
  std::vector<void*> owned_;
};

// `p` as a tensor on cuda:0.
TensorView OnGpu(void* p, DataType dtype, std::vector<int64_t> shape);

}  // namespace hora::testing
