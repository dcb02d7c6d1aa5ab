// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// One size's buffers on a GPU for hora-bench's GPU implementations (hora@,
// nccl@): the input, and the output (the input itself when the driver's
// are one buffer); the driver's input copied up before each iteration,
// untimed, and a result copied back only to be checked. The copies up go
// through a pinned buffer and a stream kept for the size's iterations:
// allocating and freeing pinned memory each time would make the driver
// remap memory between the timed calls, and slow the next ones.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "data.h"
#include "gpu/device.h"
#include "impl.h"

namespace hora::bench {

class DeviceBuffers {
 public:
  explicit DeviceBuffers(std::shared_ptr<gpu::Device> device) : device_(std::move(device)) {}
  ~DeviceBuffers();
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;

  // Buffers for `layout`'s counts of `dtype`, mirroring the driver's `host`.
  Status Prepare(const Layout& layout, DataType dtype, const Buffers& host);
  // The driver's input to the device (a failed copy shows in the check).
  void Upload();
  // `from` (device memory of the output's size; null: nothing), copied to a
  // host mirror.
  const uint8_t* Download(const void* from) const;
  void Release();

  gpu::Device& device() const { return *device_; }
  void* in() const { return in_; }
  void* out() const { return out_; }
  size_t in_bytes() const { return in_bytes_; }

 private:
  const std::shared_ptr<gpu::Device> device_;
  Buffers host_;
  size_t in_bytes_ = 0, out_bytes_ = 0;
  void* in_ = nullptr;
  void* out_ = nullptr;
  void* pinned_ = nullptr;  // in_bytes_, for the copies up
  gpu::Stream stream_;      // (id 0: none yet)
  gpu::Event event_;
  mutable std::vector<uint8_t> mirror_;
};

}  // namespace hora::bench
