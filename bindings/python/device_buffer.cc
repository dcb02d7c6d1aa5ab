// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "device_buffer.h"

#include "api/session_impl.h"
#include "dlpack_convert.h"
#include "errors.h"
#include "gpu/blocking_copy.h"

namespace hora::python {
namespace py = pybind11;
namespace {

constexpr Duration kCopyTimeout = std::chrono::seconds(60);

std::shared_ptr<gpu::Device> DeviceOf(Session& session) {
  Result<std::shared_ptr<gpu::Device>> d = session.impl().devices.Get(0);
  ThrowIfError(d.status());
  return *d;
}

}  // namespace

DeviceBuffer DeviceBuffer::FromHost(Session& session, const py::object& host_array) {
  Imported in = ImportCapsule(host_array, "_DeviceBuffer");
  if (in.view.device().type != DeviceType::kCPU) ThrowInvalid("_DeviceBuffer: not a CPU tensor");
  std::shared_ptr<gpu::Device> device = DeviceOf(session);
  Result<void*> mem = device->Allocate(in.view.num_bytes());
  ThrowIfError(mem.status());
  DeviceBuffer b;
  b.tensor_ = std::make_shared<Tensor>(
      Tensor::Adopt(TensorView(*mem, in.view.dtype(), in.view.shape(), {DeviceType::kCUDA, 0}),
                    [device](void* p) { (void)device->Free(p); }));
  py::gil_scoped_release release;
  ThrowIfError(
      gpu::CopyHostToDevice(*device, *mem, in.view.data(), in.view.num_bytes(), kCopyTimeout));
  return b;
}

py::capsule DeviceBuffer::Dlpack(const py::object&) const {
  return ExportView(tensor_->view(), tensor_);
}

py::tuple DeviceBuffer::DlpackDevice() const {
  return py::make_tuple(2 /* kDLCUDA */, tensor_->device().index);
}

py::bytes DeviceBuffer::ReadBack(Session& session, const py::object& tensor) {
  Imported in = ImportCapsule(tensor, "_DeviceBuffer.read_back");
  if (in.view.device().type != DeviceType::kCUDA) ThrowInvalid("read_back: not a GPU tensor");
  std::shared_ptr<gpu::Device> device = DeviceOf(session);
  std::string out(in.view.num_bytes(), '\0');
  {
    py::gil_scoped_release release;
    ThrowIfError(
        gpu::CopyDeviceToHost(*device, out.data(), in.view.data(), out.size(), kCopyTimeout));
  }
  return py::bytes(out);
}

void AddDeviceBuffer(py::module_& m) {
  py::class_<DeviceBuffer>(m, "_DeviceBuffer",
                           "GPU memory speaking DLPack as a CUDA producer (for tests).")
      .def("__dlpack__", &DeviceBuffer::Dlpack, py::arg("stream") = py::none())
      .def("__dlpack_device__", &DeviceBuffer::DlpackDevice);
}

}  // namespace hora::python
