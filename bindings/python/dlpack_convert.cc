// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "dlpack_convert.h"

#include <dlpack/dlpack.h>

#include <optional>
#include <utility>

#include "errors.h"

namespace hora::python {
namespace py = pybind11;
namespace {

constexpr const char* kName = "dltensor";
constexpr const char* kUsedName = "used_dltensor";

std::optional<DataType> FromDl(DLDataType t) {
  if (t.lanes != 1) return std::nullopt;
  switch (t.code) {
    case kDLUInt:
      if (t.bits == 8) return DataType::kUInt8;
      break;
    case kDLInt:
      if (t.bits == 8) return DataType::kInt8;
      if (t.bits == 16) return DataType::kInt16;
      if (t.bits == 32) return DataType::kInt32;
      if (t.bits == 64) return DataType::kInt64;
      break;
    case kDLFloat:
      if (t.bits == 16) return DataType::kFloat16;
      if (t.bits == 32) return DataType::kFloat32;
      if (t.bits == 64) return DataType::kFloat64;
      break;
    case kDLBfloat:
      if (t.bits == 16) return DataType::kBFloat16;
      break;
    default:
      break;
  }
  return std::nullopt;
}

DLDataType ToDl(DataType t) {
  const auto bits = static_cast<uint8_t>(DataTypeSize(t) * 8);
  switch (t) {
    case DataType::kUInt8:
    case DataType::kBool:
      return {kDLUInt, bits, 1};
    case DataType::kFloat16:
    case DataType::kFloat32:
    case DataType::kFloat64:
      return {kDLFloat, bits, 1};
    case DataType::kBFloat16:
      return {kDLBfloat, bits, 1};
    default:
      return {kDLInt, bits, 1};
  }
}

// Row-major and dense (strides may be absent, and are ignored along
// dimensions of size 1, and for tensors of no elements, as PyTorch reports
// them freely there).
bool Contiguous(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] == 0) return true;
  }
  int64_t expected = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] != 1 && t.strides[d] != expected) return false;
    expected *= t.shape[d];
  }
  return true;
}

std::string Describe(const DLTensor& t) {
  std::string s = "dtype code " + std::to_string(t.dtype.code) + " bits " +
                  std::to_string(t.dtype.bits) + " lanes " + std::to_string(t.dtype.lanes) + " [";
  for (int d = 0; d < t.ndim; ++d) s += (d ? ", " : "") + std::to_string(t.shape[d]);
  return s + "]";
}

// What an exported capsule owns: what keeps the memory alive (a Handle,
// which keeps its output) and the shape it describes.
struct Exported {
  DLManagedTensor managed{};
  std::shared_ptr<const void> keep;
  std::vector<int64_t> shape;
};

DLDevice ToDl(const Device& d) {
  if (d.type == DeviceType::kCUDA) return {kDLCUDA, d.index};
  return {kDLCPU, 0};
}

void DeleteExported(DLManagedTensor* m) { delete static_cast<Exported*>(m->manager_ctx); }

void CapsuleDestructor(PyObject* capsule) {
  // A consumer that took the tensor renamed the capsule; then it is theirs.
  if (!PyCapsule_IsValid(capsule, kName)) return;
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kName));
  if (m != nullptr && m->deleter != nullptr) m->deleter(m);
}

// Takes `managed` from `capsule` (renamed used): the owner returned
// releases it.
Keepalive Consume(PyObject* capsule, DLManagedTensor* managed) {
  Keepalive owner(managed, [](void* p) {
    auto* m = static_cast<DLManagedTensor*>(p);
    if (m->deleter == nullptr) return;
    py::gil_scoped_acquire gil;
    m->deleter(m);
  });
  if (PyCapsule_SetName(capsule, kUsedName) != 0) throw py::error_already_set();
  return owner;
}

}  // namespace

std::optional<Imported> TakeHostTensor(const py::object& capsule, int min_dims) {
  if (!PyCapsule_CheckExact(capsule.ptr()) || !PyCapsule_IsValid(capsule.ptr(), kName)) {
    return std::nullopt;
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kName));
  const DLTensor& t = managed->dl_tensor;
  const std::optional<DataType> dtype = FromDl(t.dtype);
  if (!dtype || *dtype == DataType::kBool) return std::nullopt;
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost) return std::nullopt;
  if (t.ndim < min_dims || !Contiguous(t)) return std::nullopt;
  Keepalive owner = Consume(capsule.ptr(), managed);
  std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
  void* data = static_cast<char*>(t.data) + t.byte_offset;
  return Imported{TensorView(data, *dtype, std::move(shape)), std::move(owner)};
}

Imported ImportCapsule(const py::object& obj, const ArgName& what, const StreamFor& stream_for) {
  py::object capsule = obj;
  if (!PyCapsule_CheckExact(capsule.ptr()) && py::hasattr(capsule, "__dlpack__")) {
    std::optional<uintptr_t> stream;
    if (stream_for && py::hasattr(obj, "__dlpack_device__")) {
      const auto device = obj.attr("__dlpack_device__")().cast<std::pair<int, int>>();
      if (device.first == kDLCUDA) stream = stream_for(device.second);
    }
    capsule =
        stream ? obj.attr("__dlpack__")(py::arg("stream") = *stream) : obj.attr("__dlpack__")();
  }
  if (!PyCapsule_CheckExact(capsule.ptr())) {
    ThrowInvalid(what.str() + ": expected a DLPack capsule or an object with __dlpack__, got " +
                 std::string(py::str(py::type::of(obj).attr("__name__"))));
  }
  if (!PyCapsule_IsValid(capsule.ptr(), kName)) {
    ThrowInvalid(what.str() +
                 ": the DLPack capsule was already used (a capsule can be consumed once)");
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kName));
  // From here on the tensor is ours: the owner releases it whatever happens.
  Keepalive owner = Consume(capsule.ptr(), managed);
  const DLTensor& t = managed->dl_tensor;
  const std::optional<DataType> dtype = FromDl(t.dtype);
  if (!dtype) ThrowInvalid(what.str() + ": unsupported dtype (" + Describe(t) + ")");
  // CUDA host memory (pinned) is host memory to Hora; managed memory, and
  // other devices', is not taken.
  Device device;
  switch (t.device.device_type) {
    case kDLCPU:
    case kDLCUDAHost:
      break;
    case kDLCUDA:
      device = {DeviceType::kCUDA, t.device.device_id};
      break;
    case kDLCUDAManaged:
      ThrowInvalid(what.str() + ": CUDA managed (unified) memory is not taken; use device memory");
    default:
      ThrowInvalid(what.str() + ": tensors on DLPack device type " +
                   std::to_string(t.device.device_type) + " are not taken (CPU and CUDA only)");
  }
  if (!Contiguous(t)) {
    ThrowInvalid(what.str() + ": tensor is not contiguous (" + Describe(t) +
                 "); pass a contiguous tensor (.contiguous())");
  }
  std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
  void* data = static_cast<char*>(t.data) + t.byte_offset;
  return {TensorView(data, *dtype, std::move(shape), device), std::move(owner)};
}

py::capsule AsBfloat16(const py::object& capsule) {
  if (!PyCapsule_CheckExact(capsule.ptr()) || !PyCapsule_IsValid(capsule.ptr(), kName)) {
    ThrowInvalid("as_bfloat16: expected an unused DLPack capsule");
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kName));
  const DLDataType t = managed->dl_tensor.dtype;
  if (t.bits != 16 || t.lanes != 1 || (t.code != kDLUInt && t.code != kDLInt)) {
    ThrowInvalid("as_bfloat16: expected 16-bit integer elements (" + Describe(managed->dl_tensor) +
                 ")");
  }
  // The tensor passes to the new capsule: the old one is used up, so its
  // destructor leaves the tensor alone.
  PyObject* cap = PyCapsule_New(managed, kName, CapsuleDestructor);
  if (cap == nullptr) throw py::error_already_set();
  if (PyCapsule_SetName(capsule.ptr(), kUsedName) != 0) {
    PyCapsule_SetName(cap, kUsedName);  // (the old capsule still owns it)
    Py_DECREF(cap);
    throw py::error_already_set();
  }
  managed->dl_tensor.dtype = {kDLBfloat, 16, 1};
  return py::reinterpret_steal<py::capsule>(cap);
}

py::capsule ExportOutput(const Handle& handle) {
  const Tensor* out = handle.output();
  if (out == nullptr) {
    ThrowInvalid("handle '" + std::string("") + "' has no output tensor");
  }
  return ExportView(out->view(), std::make_shared<Handle>(handle));
}

py::capsule ExportView(const TensorView& view, std::shared_ptr<const void> keep) {
  auto* e = new Exported;
  e->keep = std::move(keep);
  e->shape = view.shape();
  DLTensor& t = e->managed.dl_tensor;
  t.data = view.data();
  t.device = ToDl(view.device());
  t.ndim = static_cast<int32_t>(e->shape.size());
  t.dtype = ToDl(view.dtype());
  t.shape = e->shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = DeleteExported;
  PyObject* cap = PyCapsule_New(&e->managed, kName, CapsuleDestructor);
  if (cap == nullptr) {
    delete e;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(cap);
}

}  // namespace hora::python
