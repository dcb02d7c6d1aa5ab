// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Hora on GPU tensors (hora-bench --device host|cuda): the same blocking
// collectives as session_impl.cc, on buffers of the session's GPU (the host
// device, or CUDA). The driver's input is copied to the device before each
// iteration, untimed; the result is copied back only to be checked. The
// collectives whose output Hora allocates (allgather, reducescatter,
// alltoall) allocate it on the device in every iteration, timed: the forms
// that write into a given output take host tensors only. Allreduce and
// broadcast are named, one name for every call (as a training step's
// tensors are, by DistributedOptimizer): a call after the first is a
// steady-state one, which the engine knows from its response cache.
#include <optional>

#include "api/session_impl.h"
#include "device_buffers.h"
#include "impl.h"

namespace hora::bench {
namespace {

constexpr const char* kName = "hora-bench";

class DeviceImpl final : public Impl {
 public:
  DeviceImpl(Session& s, std::shared_ptr<gpu::Device> device, std::string name)
      : s_(s), buffers_(std::move(device)), name_(std::move(name)) {}

  std::string name() const override { return name_; }
  std::string Unsupported(const Args&) const override { return ""; }

  Status Prepare(const Args& args, const Layout& layout, const Buffers& b) override {
    result_.reset();
    args_ = &args;
    layout_ = layout;
    return buffers_.Prepare(layout, args.dtype, b);
  }

  void BeforeRun() override { buffers_.Upload(); }

  Status Run() override {
    const DataType t = args_->dtype;
    const Device gpu{DeviceType::kCUDA, buffers_.device().info().ordinal};
    const TensorView in(buffers_.in(), t, {static_cast<int64_t>(layout_.in_count)}, gpu);
    const TensorView out(buffers_.out(), t, {static_cast<int64_t>(layout_.out_count)}, gpu);
    result_.reset();
    switch (args_->collective) {
      case Collective::kAllreduce:
        return s_.AllreduceAsync(kName, in, out, {args_->op}).Wait(kWaitAsLongAsItTakes);
      case Collective::kBroadcast:
        return s_.BroadcastAsync(kName, in, args_->root).Wait(kWaitAsLongAsItTakes);
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
    return buffers_.Download(result_ ? result_->data() : buffers_.out());
  }

 private:
  Status Keep(Result<Tensor> r) {
    if (!r.ok()) return r.status();
    result_ = std::move(r).value();
    return Status::Ok();
  }
  Session& s_;
  DeviceBuffers buffers_;
  const std::string name_;
  const Args* args_ = nullptr;
  Layout layout_;
  std::optional<Tensor> result_;  // (declared after the buffers: freed first)
};

}  // namespace

Result<std::unique_ptr<Impl>> MakeDeviceImpl(Session& session, const std::string& device) {
  HORA_ASSIGN_OR_RETURN(std::shared_ptr<gpu::Device> d, session.impl().devices.Get(0));
  return std::unique_ptr<Impl>(
      std::make_unique<DeviceImpl>(session, std::move(d), "hora@" + device));
}

}  // namespace hora::bench
