// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The NCCL peer of hora-bench (--device cuda --peers nccl): NCCL's own
// allreduce and broadcast on buffers of the rank's GPU, through Hora's seam
// to the library (backends/nccl/nccl.h), timed until the GPU is done, beside
// Hora's path on the same GPU ("hora@cuda", which the driver keeps off NCCL
// with HORA_GPU_BACKEND=hora). The input is copied to the device before
// each iteration, untimed, as for hora@cuda. With --device host, NCCL's
// stand-in on the host device ("nccl@host", HORA_NCCL_LIBRARY=host's, its
// calls queued on the stream): for tests of the peer, not for its times.
#include <chrono>
#include <cstring>

#include "api/session_impl.h"
#include "backends/nccl/nccl.h"
#include "device_buffers.h"
#include "doubles/host_nccl.h"
#include "impl.h"

namespace hora::bench {
namespace {

constexpr Duration kTimeout = std::chrono::seconds(120);

class NcclImpl final : public Impl {
 public:
  NcclImpl(std::string name, std::shared_ptr<gpu::Device> device,
           std::unique_ptr<NcclLibrary> library, std::unique_ptr<NcclComm> comm, gpu::Stream stream,
           gpu::Event done)
      : name_(std::move(name)),
        device_(device),
        buffers_(std::move(device)),
        library_(std::move(library)),
        comm_(std::move(comm)),
        stream_(stream),
        done_(done) {}
  ~NcclImpl() override {
    buffers_.Release();
    comm_.reset();
    (void)device_->DestroyEvent(done_);
    (void)device_->DestroyStream(stream_);
  }

  std::string name() const override { return name_; }
  std::string Unsupported(const Args& args) const override {
    if (args.collective == Collective::kBroadcast) return "";
    if (args.collective != Collective::kAllreduce) return "the nccl peer runs allreduce, broadcast";
    if (!NcclTakes(args.dtype, args.op)) {
      return std::string("NCCL is not given ") + DataTypeName(args.dtype) + " " +
             ReduceOpName(args.op) + " here";
    }
    return "";
  }

  Status Prepare(const Args& args, const Layout& layout, const Buffers& b) override {
    args_ = &args;
    layout_ = layout;
    return buffers_.Prepare(layout, args.dtype, b);
  }

  void BeforeRun() override { buffers_.Upload(); }

  Status Run() override {
    if (args_->collective == Collective::kBroadcast) {
      HORA_RETURN_IF_ERROR(
          comm_->Broadcast(buffers_.in(), buffers_.in_bytes(), args_->root, stream_));
    } else {
      HORA_RETURN_IF_ERROR(comm_->AllReduce(buffers_.in(), buffers_.out(), layout_.in_count,
                                            args_->dtype, args_->op, stream_));
    }
    HORA_RETURN_IF_ERROR(device_->Record(done_, stream_));
    return device_->Wait(done_, DeadlineAfter(Clock::now(), kTimeout));
  }

  const uint8_t* Output() const override { return buffers_.Download(buffers_.out()); }

 private:
  const std::string name_;
  const std::shared_ptr<gpu::Device> device_;
  DeviceBuffers buffers_;
  std::unique_ptr<NcclLibrary> library_;
  std::unique_ptr<NcclComm> comm_;
  const gpu::Stream stream_;
  const gpu::Event done_;
  const Args* args_ = nullptr;
  Layout layout_;
};

}  // namespace

Result<std::unique_ptr<Impl>> MakeNcclImpl(Session& session, const std::string& device) {
  if (device != "cuda" && device != "host") {
    return InvalidArgument("--peers nccl needs --device cuda (or host, for NCCL's stand-in)");
  }
  HORA_ASSIGN_OR_RETURN(std::shared_ptr<gpu::Device> d, session.impl().devices.Get(0));
  const std::string& path = session.impl().config.nccl_library;
  HORA_ASSIGN_OR_RETURN(std::unique_ptr<NcclLibrary> library,
                        device == "host" ? CreateHostNccl(":queued") : OpenNcclLibrary(path));
  // Rank 0's id, to every rank through Hora (host memory).
  NcclId id;
  if (session.rank() == 0) {
    HORA_ASSIGN_OR_RETURN(id, library->UniqueId());
  }
  HORA_RETURN_IF_ERROR(session.Broadcast(
      TensorView::Flat(id.bytes.data(), DataType::kUInt8, static_cast<int64_t>(id.bytes.size())),
      0));
  HORA_ASSIGN_OR_RETURN(std::unique_ptr<NcclComm> comm,
                        library->InitRank(id, session.size(), session.rank(), *d, kTimeout));
  HORA_ASSIGN_OR_RETURN(const gpu::Stream stream, d->CreateStream());
  HORA_ASSIGN_OR_RETURN(const gpu::Event done, d->CreateEvent());
  return std::unique_ptr<Impl>(std::make_unique<NcclImpl>("nccl@" + device, d, std::move(library),
                                                          std::move(comm), stream, done));
}

}  // namespace hora::bench
