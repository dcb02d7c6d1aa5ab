// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Hora's blocking collectives (Session), with Hora's algorithms or, for the
// "mpi" peer, a Session whose backend is the MPI library's own collectives.
#include "impl.h"

namespace hora::bench {
namespace {

class SessionImpl final : public Impl {
 public:
  SessionImpl(Session& s, std::string name) : s_(s), name_(std::move(name)) {}

  std::string name() const override { return name_; }
  std::string Unsupported(const Args&) const override { return ""; }

  Status Prepare(const Args& args, const Layout& layout, const Buffers& b) override {
    args_ = &args;
    layout_ = layout;
    b_ = b;
    return Status::Ok();
  }

  Status Run() override {
    // Into the driver's output buffer, reused across iterations (as
    // nccl-tests and the MPI peers do): the time is the collective's, not an
    // allocation's.
    const DataType t = args_->dtype;
    const auto in = TensorView::Flat(b_.in, t, layout_.in_count);
    const auto out = TensorView::Flat(b_.out, t, layout_.out_count);
    switch (args_->collective) {
      case Collective::kAllreduce:
        return s_.Allreduce(in, out, {args_->op});
      case Collective::kBroadcast:
        return s_.Broadcast(in, args_->root);
      case Collective::kAllgather:
        return s_.Allgather(in, out);
      case Collective::kReducescatter:
        return s_.Reducescatter(in, out, {args_->op});
      case Collective::kAlltoall:
        return s_.Alltoall(in, {}, out);
    }
    return InternalError("unknown collective");
  }

  const uint8_t* Output() const override {
    return args_->collective == Collective::kBroadcast ? b_.in : b_.out;
  }

 private:
  Session& s_;
  const std::string name_;
  const Args* args_ = nullptr;
  Layout layout_;
  Buffers b_;
};

}  // namespace

std::unique_ptr<Impl> MakeSessionImpl(Session& session, std::string name) {
  return std::make_unique<SessionImpl>(session, std::move(name));
}

}  // namespace hora::bench
