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
    result_ = Tensor();
    return Status::Ok();
  }

  Status Run() override {
    const DataType t = args_->dtype;
    const auto in = TensorView::Flat(b_.in, t, layout_.in_count);
    switch (args_->collective) {
      case Collective::kAllreduce:
        return s_.Allreduce(in, TensorView::Flat(b_.out, t, layout_.out_count), {args_->op});
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
    if (args_->collective == Collective::kAllreduce) return b_.out;
    if (args_->collective == Collective::kBroadcast) return b_.in;
    return static_cast<const uint8_t*>(result_.data());
  }

 private:
  Status Keep(Result<Tensor> r) {
    if (!r.ok()) return r.status();
    result_ = std::move(*r);
    return Status::Ok();
  }

  Session& s_;
  const std::string name_;
  const Args* args_ = nullptr;
  Layout layout_;
  Buffers b_;
  Tensor result_;
};

}  // namespace

std::unique_ptr<Impl> MakeSessionImpl(Session& session, std::string name) {
  return std::make_unique<SessionImpl>(session, std::move(name));
}

}  // namespace hora::bench
