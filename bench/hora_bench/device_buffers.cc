// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "device_buffers.h"

#include <chrono>
#include <cstring>

#include "gpu/blocking_copy.h"

namespace hora::bench {
namespace {

constexpr Duration kCopyTimeout = std::chrono::seconds(120);

}  // namespace

Status DeviceBuffers::Prepare(const Layout& layout, DataType dtype, const Buffers& host) {
  Release();
  host_ = host;
  const size_t esize = DataTypeSize(dtype);
  in_bytes_ = layout.in_count * esize;
  out_bytes_ = layout.out_count * esize;
  if (stream_.id == 0) {
    HORA_ASSIGN_OR_RETURN(stream_, device_->CreateStream());
    HORA_ASSIGN_OR_RETURN(event_, device_->CreateEvent());
  }
  HORA_ASSIGN_OR_RETURN(pinned_, device_->AllocatePinned(in_bytes_));
  HORA_ASSIGN_OR_RETURN(in_, device_->Allocate(in_bytes_));
  out_ = in_;
  if (host.out != host.in) {
    HORA_ASSIGN_OR_RETURN(out_, device_->Allocate(out_bytes_));
  }
  mirror_.assign(out_bytes_, 0);
  return Status::Ok();
}

void DeviceBuffers::Upload() {
  if (in_bytes_ == 0) return;
  std::memcpy(pinned_, host_.in, in_bytes_);
  Status st = device_->Copy(in_, pinned_, in_bytes_, gpu::CopyKind::kHostToDevice, stream_);
  if (st.ok()) st = device_->Record(event_, stream_);
  if (st.ok()) (void)device_->Wait(event_, DeadlineAfter(Clock::now(), kCopyTimeout));
}

const uint8_t* DeviceBuffers::Download(const void* from) const {
  if (from != nullptr && out_bytes_ > 0) {
    (void)gpu::CopyDeviceToHost(*device_, mirror_.data(), from, out_bytes_, kCopyTimeout);
  }
  return mirror_.data();
}

DeviceBuffers::~DeviceBuffers() {
  Release();
  if (event_.id != 0) (void)device_->DestroyEvent(event_);
  if (stream_.id != 0) (void)device_->DestroyStream(stream_);
}

void DeviceBuffers::Release() {
  if (pinned_ != nullptr) (void)device_->FreePinned(pinned_);
  pinned_ = nullptr;
  if (out_ != nullptr && out_ != in_) (void)device_->Free(out_);
  if (in_ != nullptr) (void)device_->Free(in_);
  in_ = out_ = nullptr;
}

}  // namespace hora::bench
