// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "device_buffer.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "api/session_impl.h"
#include "dlpack_convert.h"
#include "doubles/host_device.h"
#include "errors.h"
#include "gpu/blocking_copy.h"

namespace hora::python {
namespace py = pybind11;
namespace {

constexpr Duration kCopyTimeout = std::chrono::seconds(60);

std::shared_ptr<gpu::Device> DeviceOf(Session& session, int ordinal) {
  Result<std::shared_ptr<gpu::Device>> d = session.impl().devices.Get(ordinal);
  ThrowIfError(d.status());
  return *d;
}

}  // namespace

// The producer of a buffer written late: its stream, the event it records
// there for a consumer, and the pinned source of its write.
struct DeviceBuffer::Producer {
  std::shared_ptr<gpu::Device> device;
  gpu::Stream stream;
  gpu::Event event;
  void* pinned = nullptr;
  ~Producer() {
    if (stream.id != 0) (void)device->DestroyStream(stream);  // (waits for the write)
    if (event.id != 0) (void)device->DestroyEvent(event);
    if (pinned != nullptr) (void)device->FreePinned(pinned);
  }
};

int RankOrdinal(Session& session, const py::object& device) {
  if (!device.is_none()) return device.cast<int>();
  const std::shared_ptr<gpu::Device> open = session.impl().devices.opened();
  return open ? open->info().ordinal : 0;
}

DeviceBuffer DeviceBuffer::FromHost(Session& session, const py::object& host_array,
                                    const py::object& later, double delay_s,
                                    const py::object& device_index) {
  Imported in = ImportCapsule(host_array, "_DeviceBuffer");
  if (in.view.device().type != DeviceType::kCPU) ThrowInvalid("_DeviceBuffer: not a CPU tensor");
  const int ordinal = RankOrdinal(session, device_index);
  std::shared_ptr<gpu::Device> device = DeviceOf(session, ordinal);
  Result<void*> mem = device->Allocate(in.view.num_bytes());
  ThrowIfError(mem.status());
  DeviceBuffer b;
  b.tensor_ = std::make_shared<Tensor>(Tensor::Adopt(
      TensorView(*mem, in.view.dtype(), in.view.shape(), {DeviceType::kCUDA, ordinal}),
      [device](void* p) { (void)device->Free(p); }));
  {
    py::gil_scoped_release release;
    ThrowIfError(
        gpu::CopyHostToDevice(*device, *mem, in.view.data(), in.view.num_bytes(), kCopyTimeout));
  }
  if (later.is_none()) return b;
  Imported l = ImportCapsule(later, "_DeviceBuffer later");
  auto* host = dynamic_cast<gpu::HostDevice*>(device.get());
  if (host == nullptr) ThrowInvalid("_DeviceBuffer: a late write needs HORA_DEVICE=host");
  if (l.view.num_bytes() != in.view.num_bytes()) ThrowInvalid("_DeviceBuffer: sizes differ");
  auto p = std::make_shared<Producer>();
  p->device = device;
  auto stream = device->CreateStream();
  ThrowIfError(stream.status());
  p->stream = *stream;
  auto event = device->CreateEvent();
  ThrowIfError(event.status());
  p->event = *event;
  auto pinned = device->AllocatePinned(l.view.num_bytes());
  ThrowIfError(pinned.status());
  p->pinned = *pinned;
  if (l.view.num_bytes() > 0) std::memcpy(p->pinned, l.view.data(), l.view.num_bytes());
  const auto delay = std::chrono::duration<double>(delay_s);
  ThrowIfError(host->RunOnStream(p->stream, [delay] { std::this_thread::sleep_for(delay); }));
  ThrowIfError(
      device->Copy(*mem, p->pinned, l.view.num_bytes(), gpu::CopyKind::kHostToDevice, p->stream));
  b.producer_ = std::move(p);
  return b;
}

py::capsule DeviceBuffer::Dlpack(const py::object& stream) const {
  if (producer_ && !stream.is_none()) {
    const Producer& p = *producer_;
    ThrowIfError(p.device->Record(p.event, p.stream));
    ThrowIfError(p.device->StreamWait(gpu::Stream{stream.cast<uint64_t>()}, p.event));
  }
  return ExportView(tensor_->view(), tensor_);
}

py::tuple DeviceBuffer::DlpackDevice() const {
  return py::make_tuple(2 /* kDLCUDA */, tensor_->device().index);
}

py::bytes DeviceBuffer::ReadBack(Session& session, const py::object& tensor,
                                 std::optional<uint64_t> after) {
  Imported in = ImportCapsule(tensor, "_DeviceBuffer.read_back");
  if (in.view.device().type != DeviceType::kCUDA) ThrowInvalid("read_back: not a GPU tensor");
  std::shared_ptr<gpu::Device> device = DeviceOf(session, in.view.device().index);
  std::string out(in.view.num_bytes(), '\0');
  {
    py::gil_scoped_release release;
    if (after) {  // what is queued on that stream so far, first
      Result<gpu::Event> e = device->CreateEvent();
      ThrowIfError(e.status());
      Status st = device->Record(*e, gpu::Stream{*after});
      if (st.ok()) st = device->Wait(*e, DeadlineAfter(Clock::now(), kCopyTimeout));
      (void)device->DestroyEvent(*e);
      ThrowIfError(st);
    }
    ThrowIfError(
        gpu::CopyDeviceToHost(*device, out.data(), in.view.data(), out.size(), kCopyTimeout));
  }
  return py::bytes(out);
}

void DeviceBuffer::HoldCopiesToDevice(Session& session, bool hold) {
  auto* host = dynamic_cast<gpu::HostDevice*>(session.impl().devices.opened().get());
  if (host == nullptr) ThrowInvalid("_hold_copies_to_device: needs an open host device");
  if (hold) {
    host->HoldCopies(gpu::CopyKind::kHostToDevice);
  } else {
    host->ReleaseCopies();
  }
}

StreamFor StreamsOf(Session& session) {
  return [&session](int device_id) -> std::optional<uintptr_t> {
    gpu::LazyDevice& devices = session.impl().devices;
    if (!devices.Get(device_id).ok()) return std::nullopt;
    return devices.stream().id;
  };
}

void AddDeviceBuffer(py::module_& m) {
  py::class_<DeviceBuffer>(m, "_DeviceBuffer",
                           "GPU memory speaking DLPack as a CUDA producer (for tests).")
      .def("__dlpack__", &DeviceBuffer::Dlpack, py::arg("stream") = py::none())
      .def("__dlpack_device__", &DeviceBuffer::DlpackDevice);
}

}  // namespace hora::python
