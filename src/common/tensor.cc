// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "hora/tensor.h"

#include <cstdlib>
#include <cstring>
#include <iterator>

#include "common/output_memory.h"

namespace hora {

std::string DeviceName(const Device& d) {
  if (d.type == DeviceType::kCPU) return "cpu";
  return "cuda:" + std::to_string(d.index);
}

size_t TensorView::num_elements() const {
  size_t n = 1;
  for (int64_t d : shape_) n *= static_cast<size_t>(d < 0 ? 0 : d);
  return n;
}

size_t TensorView::row_elements() const {
  size_t n = 1;
  for (size_t i = 1; i < shape_.size(); ++i)
    n *= static_cast<size_t>(shape_[i] < 0 ? 0 : shape_[i]);
  return n;
}

Status TensorView::Validate() const {
  // (Before anything names the dtype: an unknown one has no name.)
  if (static_cast<size_t>(dtype_) >= std::size(kAllDataTypes)) {
    return InvalidArgument("unknown dtype " + std::to_string(static_cast<int>(dtype_)) +
                           " (a DataType value out of range)");
  }
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (shape_[i] < 0) {
      return InvalidArgument("dimension " + std::to_string(i) + " is negative (" + Describe() +
                             ")");
    }
  }
  if (data_ == nullptr && num_elements() > 0) {
    return InvalidArgument("data pointer is null for " + Describe());
  }
  if (device_.type != DeviceType::kCPU && device_.type != DeviceType::kCUDA) {
    return InvalidArgument("unknown device type " + std::to_string(static_cast<int>(device_.type)) +
                           " for " + Describe());
  }
  if (device_.index < 0) {
    return InvalidArgument("device index " + std::to_string(device_.index) + " is negative (" +
                           Describe() + ")");
  }
  return Status::Ok();
}

std::string TensorView::Describe() const {
  std::string s = DataTypeName(dtype_);
  s += "[";
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape_[i]);
  }
  s += "] on " + DeviceName(device_);
  return s;
}

void Tensor::Release::operator()(void* p) const {
  if (fn) {
    fn(p);
  } else {
    std::free(p);
  }
}

Tensor Tensor::Adopt(const TensorView& view, std::function<void(void*)> release) {
  Tensor t;
  t.storage_ = std::unique_ptr<void, Release>(view.data(), Release{std::move(release)});
  t.view_ = view;
  return t;
}

Tensor::Tensor(DataType dtype, std::vector<int64_t> shape) {
  *this = Uninitialized(dtype, std::move(shape));
  if (data() != nullptr) std::memset(data(), 0, num_bytes());
}

Tensor Tensor::Uninitialized(DataType dtype, std::vector<int64_t> shape) {
  void* p = OutputMemory(TensorView(nullptr, dtype, shape).num_bytes());
  Tensor t;
  t.storage_.reset(p);
  t.view_ = TensorView(p, dtype, std::move(shape));
  return t;
}

}  // namespace hora
