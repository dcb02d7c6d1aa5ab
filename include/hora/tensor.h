// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// TensorView: a non-owning description of a dense, contiguous (row-major)
// tensor: pointer, element type, shape and device. Hora never keeps a
// TensorView past the call (or, for asynchronous calls, past completion of
// the returned handle): the caller owns the memory and keeps it alive.
//
// Tensor: a tensor whose memory Hora allocated, returned by collectives whose
// output size is known only after the ranks exchanged sizes (allgather,
// alltoall, reducescatter). Host storage is 64-byte aligned; the output of
// a collective on GPU tensors is on their GPU (device() says which).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hora/status.h"
#include "hora/types.h"

namespace hora {

enum class DeviceType : uint8_t { kCPU = 0, kCUDA = 1 };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;
  bool operator==(const Device&) const = default;
};

// "cpu" or "cuda:N".
std::string DeviceName(const Device& d);

class TensorView {
 public:
  TensorView() = default;
  // `data` may be null only when the tensor has zero elements.
  TensorView(void* data, DataType dtype, std::vector<int64_t> shape, Device device = {})
      : data_(data), dtype_(dtype), shape_(std::move(shape)), device_(device) {}

  // A one-dimensional view of `count` elements.
  static TensorView Flat(void* data, DataType dtype, size_t count) {
    return TensorView(data, dtype, {static_cast<int64_t>(count)});
  }

  void* data() const { return data_; }
  DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const Device& device() const { return device_; }

  // Product of the dimensions (1 for a scalar of rank 0).
  size_t num_elements() const;
  size_t num_bytes() const { return num_elements() * DataTypeSize(dtype_); }
  // Elements per index of dimension 0 (product of the other dimensions).
  size_t row_elements() const;

  // Checks that every dimension is non-negative, `data` is non-null when
  // there are elements, and the device is supported. The caller adds which
  // tensor of which operation it was (nothing is formatted unless it fails).
  Status Validate() const;

  // "float32[4, 3] on cpu".
  std::string Describe() const;

 private:
  void* data_ = nullptr;
  DataType dtype_ = DataType::kFloat32;
  std::vector<int64_t> shape_;
  Device device_;
};

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-filled, 64-byte aligned host memory.
  Tensor(DataType dtype, std::vector<int64_t> shape);
  // The same without the zero fill (contents unspecified), for outputs that
  // are written whole: collectives' results.
  static Tensor Uninitialized(DataType dtype, std::vector<int64_t> shape);
  // Memory allocated elsewhere (a GPU's), described by `view` and given
  // back by `release` when the tensor goes.
  static Tensor Adopt(const TensorView& view, std::function<void(void*)> release);

  TensorView view() const { return view_; }
  const Device& device() const { return view_.device(); }
  void* data() const { return view_.data(); }
  DataType dtype() const { return view_.dtype(); }
  const std::vector<int64_t>& shape() const { return view_.shape(); }
  size_t num_elements() const { return view_.num_elements(); }
  size_t num_bytes() const { return view_.num_bytes(); }

 private:
  struct Release {
    std::function<void(void*)> fn;  // empty: std::free
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Release> storage_;
  TensorView view_;
};

}  // namespace hora
