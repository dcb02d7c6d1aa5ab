// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Hora on GPU tensors (hora-bench --device host|cuda): the same blocking
// collectives as session_impl.cc, on buffers of the session's GPU (the host
// device, or CUDA). The driver's input is copied to the device before each
// iteration, untimed; the result is copied back only to be checked. The
// collectives whose output Hora allocates (allgather, reducescatter,
// alltoall) allocate it on the device in every iteration, timed: the forms
// that write into a given output take host tensors only.
#include <chrono>
#include <optional>

#include "api/session_impl.h"
#include "gpu/blocking_copy.h"
#include "impl.h"

namespace hora::bench {
namespace {

constexpr Duration kCopyTimeout = std::chrono::seconds(120);

class DeviceImpl final : public Impl {
 public:
  DeviceImpl(Session& s, std::shared_ptr<gpu::Device> device, std::string name)
      : s_(s), device_(std::move(device)), name_(std::move(name)) {}
  ~DeviceImpl() override { Release(); }

  std::string name() const override { return name_; }
  std::string Unsupported(const Args&) const override { return ""; }

  Status Prepare(const Args& args, const Layout& layout, const Buffers& b) override {
    Release();
    args_ = &args;
    layout_ = layout;
    host_ = b;
    const size_t esize = DataTypeSize(args.dtype);
    in_bytes_ = layout.in_count * esize;
    out_bytes_ = layout.out_count * esize;
    HORA_ASSIGN_OR_RETURN(in_, device_->Allocate(in_bytes_));
    out_ = in_;
    if (b.out != b.in) {
      HORA_ASSIGN_OR_RETURN(out_, device_->Allocate(out_bytes_));
    }
    mirror_.assign(out_bytes_, 0);
    return Status::Ok();
  }

  void BeforeRun() override {
    // (A failed copy shows in the check: the results would be wrong.)
    (void)gpu::CopyHostToDevice(*device_, in_, host_.in, in_bytes_, kCopyTimeout);
  }

  Status Run() override {
    const DataType t = args_->dtype;
    const Device gpu{DeviceType::kCUDA, device_->info().ordinal};
    const TensorView in(in_, t, {static_cast<int64_t>(layout_.in_count)}, gpu);
    const TensorView out(out_, t, {static_cast<int64_t>(layout_.out_count)}, gpu);
    result_.reset();
    switch (args_->collective) {
      case Collective::kAllreduce:
        return s_.Allreduce(in, out, {args_->op});
      case Collective::kBroadcast:
        return s_.Broadcast(in, args_->root);
      case Collective::kAllgather:
        return Keep(s_.Allgather(in));
      case Collective::kReducescatter:
        return Keep(s_.Reducescatter(in, {args_->op}));
      case Collective::kAlltoall:
        return Keep(s_.Alltoall(in, {}));
    }
    return InternalError("unknown collective");
  }

  const uint8_t* Output() const override {
    const void* from = result_ ? result_->data() : (layout_.out_count > 0 ? out_ : nullptr);
    if (from != nullptr) {
      (void)gpu::CopyDeviceToHost(*device_, mirror_.data(), from, out_bytes_, kCopyTimeout);
    }
    return mirror_.data();
  }

 private:
  Status Keep(Result<Tensor> r) {
    if (!r.ok()) return r.status();
    result_ = std::move(r).value();
    return Status::Ok();
  }
  void Release() {
    result_.reset();
    if (out_ != nullptr && out_ != in_) (void)device_->Free(out_);
    if (in_ != nullptr) (void)device_->Free(in_);
    in_ = out_ = nullptr;
  }

  Session& s_;
  const std::shared_ptr<gpu::Device> device_;
  const std::string name_;
  const Args* args_ = nullptr;
  Layout layout_;
  Buffers host_;
  size_t in_bytes_ = 0, out_bytes_ = 0;
  void* in_ = nullptr;
  void* out_ = nullptr;
  std::optional<Tensor> result_;
  mutable std::vector<uint8_t> mirror_;
};

}  // namespace

Result<std::unique_ptr<Impl>> MakeDeviceImpl(Session& session, const std::string& device) {
  HORA_ASSIGN_OR_RETURN(std::shared_ptr<gpu::Device> d, session.impl().devices.Get(0));
  return std::unique_ptr<Impl>(
      std::make_unique<DeviceImpl>(session, std::move(d), "hora@" + device));
}

}  // namespace hora::bench
