// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The Gloo peer (libgloo, the library under torch.distributed's gloo
// backend): allreduce as ring ("gloo_ring") and halving-doubling
// ("gloo_hd"), allgather ring, broadcast one-to-all, reducescatter
// halving-doubling and pairwise alltoall ("gloo"), over Gloo's TCP transport.
// Gloo's ranks meet through Hora's rendezvous store (HORA_STORE_ADDR, the
// job secret), under keys of their own.
//
// Gloo reduces in place: for out-of-place allreduce the input is copied to
// the output before each iteration, outside the timed region.
#include "gloo_impl.h"

#include <cstdlib>
#include <cstring>
#include <exception>

#include <gloo/allgather_ring.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/alltoall.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "common/clock.h"
#include "net/socket.h"
#include "net_util.h"
#include "store/tcp_store_client.h"

namespace hora::bench {
namespace {

// Gloo's store interface over Hora's rendezvous store; Gloo expects errors
// as exceptions.
class StoreAdapter final : public gloo::rendezvous::Store {
 public:
  StoreAdapter(std::unique_ptr<hora::Store> store, Duration timeout)
      : store_(std::move(store)), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    Check(store_->Set(key, hora::Bytes(data.begin(), data.end())));
  }
  std::vector<char> get(const std::string& key) override {
    auto v = store_->Get(key, timeout_);
    Check(v.status());
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { Check(store_->Wait(keys, timeout_)); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& t) override {
    Check(store_->Wait(keys, std::chrono::duration_cast<Duration>(t)));
  }

 private:
  static void Check(const Status& st) {
    if (!st.ok()) throw std::runtime_error("gloo rendezvous: " + st.ToString());
  }
  std::unique_ptr<hora::Store> store_;
  Duration timeout_;
};

template <typename T>
const gloo::ReductionFunction<T>* Fn(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMin:
      return gloo::ReductionFunction<T>::min;
    case ReduceOp::kMax:
      return gloo::ReductionFunction<T>::max;
    case ReduceOp::kProduct:
      return gloo::ReductionFunction<T>::product;
    default:
      return gloo::ReductionFunction<T>::sum;
  }
}

class GlooImpl final : public Impl {
 public:
  GlooImpl(std::shared_ptr<gloo::Context> ctx, std::string name, bool halving_doubling)
      : ctx_(std::move(ctx)), name_(std::move(name)), hd_(halving_doubling) {}

  std::string name() const override { return name_; }

  std::string Unsupported(const Args& a) const override {
    if (a.op == ReduceOp::kAverage) return "Gloo has no average";
    switch (a.dtype) {
      case DataType::kBFloat16:
      case DataType::kBool:
        return std::string("Gloo has no ") + DataTypeName(a.dtype);
      default:
        return "";
    }
  }

  Status Prepare(const Args& a, const Layout& l, const Buffers& b) override {
    args_ = &a;
    layout_ = l;
    b_ = b;
    algo_.reset();
    try {
      switch (a.dtype) {
        case DataType::kFloat32:
          return Build<float>();
        case DataType::kFloat64:
          return Build<double>();
        case DataType::kFloat16:
          return Build<gloo::float16>();
        case DataType::kInt8:
          return Build<int8_t>();
        case DataType::kUInt8:
          return Build<uint8_t>();
        case DataType::kInt16:
          return Build<int16_t>();
        case DataType::kInt32:
          return Build<int32_t>();
        case DataType::kInt64:
          return Build<int64_t>();
        default:
          return UnimplementedError(Unsupported(a));
      }
    } catch (const std::exception& e) {
      return UnavailableError(name_ + ": " + e.what());
    }
  }

  void BeforeRun() override {
    if (args_->collective == Collective::kAllreduce && b_.out != b_.in)
      std::memcpy(b_.out, b_.in, layout_.in_count * DataTypeSize(args_->dtype));
  }

  Status Run() override {
    try {
      if (algo_) {
        algo_->run();
      } else {  // alltoall
        gloo::AlltoallOptions opts(ctx_);
        const size_t bytes = layout_.in_count * DataTypeSize(args_->dtype);
        opts.setInput(b_.in, bytes);
        opts.setOutput(b_.out, bytes);
        gloo::alltoall(opts);
      }
      return Status::Ok();
    } catch (const std::exception& e) {
      return UnavailableError(name_ + ": " + e.what());
    }
  }

  const uint8_t* Output() const override {
    switch (args_->collective) {
      case Collective::kBroadcast:
      case Collective::kReducescatter:  // this rank's block, at the start of the input
        return b_.in;
      default:
        return b_.out;
    }
  }

 private:
  template <typename T>
  Status Build() {
    T* in = reinterpret_cast<T*>(b_.in);
    T* out = reinterpret_cast<T*>(b_.out);
    const int count = static_cast<int>(layout_.in_count);
    switch (args_->collective) {
      case Collective::kAllreduce:
        if (hd_)
          algo_ = std::make_unique<gloo::AllreduceHalvingDoubling<T>>(ctx_, std::vector<T*>{out},
                                                                      count, Fn<T>(args_->op));
        else
          algo_ = std::make_unique<gloo::AllreduceRing<T>>(ctx_, std::vector<T*>{out}, count,
                                                           Fn<T>(args_->op));
        break;
      case Collective::kAllgather:
        algo_ =
            std::make_unique<gloo::AllgatherRing<T>>(ctx_, std::vector<const T*>{in}, out, count);
        break;
      case Collective::kBroadcast:
        algo_ = std::make_unique<gloo::BroadcastOneToAll<T>>(ctx_, std::vector<T*>{in},
                                                             layout_.in_count, args_->root);
        break;
      case Collective::kReducescatter:
        algo_ = std::make_unique<gloo::ReduceScatterHalvingDoubling<T>>(
            ctx_, std::vector<T*>{in}, count,
            std::vector<int>(static_cast<size_t>(ctx_->size), static_cast<int>(layout_.chunk)),
            Fn<T>(args_->op));
        break;
      case Collective::kAlltoall:
        break;  // functional API, in Run
    }
    return Status::Ok();
  }

  std::shared_ptr<gloo::Context> ctx_;
  const std::string name_;
  const bool hd_;
  const Args* args_ = nullptr;
  Layout layout_;
  Buffers b_;
  std::unique_ptr<gloo::Algorithm> algo_;
};

}  // namespace

Result<std::vector<std::unique_ptr<Impl>>> MakeGlooImpls(const Session& session,
                                                         Collective collective, double timeout_s) {
  const Duration timeout = SecondsToDuration(timeout_s);
  const std::string addr = Env("HORA_STORE_ADDR");
  if (addr.empty() && session.size() > 1)
    return InvalidArgument(
        "--peers gloo: no rendezvous store (HORA_STORE_ADDR); run under horarun");
  std::shared_ptr<gloo::Context> ctx;
  try {
    auto context = std::make_shared<gloo::rendezvous::Context>(session.rank(), session.size());
    context->setTimeout(std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
    gloo::transport::tcp::attr attr;
    if (session.size() > 1) {
      HORA_ASSIGN_OR_RETURN(net::HostPort hp, net::ParseHostPort(addr));
      HORA_ASSIGN_OR_RETURN(auto client, TcpStoreClient::Connect(hp, Env("HORA_SECRET"), timeout));
      if (!Env("HORA_IFACE").empty()) {
        attr.iface = Env("HORA_IFACE");
      } else {
        HORA_ASSIGN_OR_RETURN(attr.hostname, LocalAddressToward(hp.host));
      }
      auto store = std::make_shared<StoreAdapter>(std::move(client), timeout);
      gloo::rendezvous::PrefixStore prefixed(
          std::string("hora-bench/gloo/") + Env("HORA_JOB_ID") + "/" + CollectiveName(collective),
          *store);
      auto device = gloo::transport::tcp::CreateDevice(attr);
      context->connectFullMesh(prefixed, device);
    } else {
      attr.hostname = "127.0.0.1";
      auto device = gloo::transport::tcp::CreateDevice(attr);
      gloo::rendezvous::HashStore local;
      context->connectFullMesh(local, device);
    }
    ctx = context;
  } catch (const std::exception& e) {
    return UnavailableError(std::string("--peers gloo: connecting Gloo failed: ") + e.what());
  }
  std::vector<std::unique_ptr<Impl>> impls;
  if (collective == Collective::kAllreduce) {
    impls.push_back(std::make_unique<GlooImpl>(ctx, "gloo_ring", false));
    impls.push_back(std::make_unique<GlooImpl>(ctx, "gloo_hd", true));
  } else {
    impls.push_back(std::make_unique<GlooImpl>(ctx, "gloo", false));
  }
  return impls;
}

}  // namespace hora::bench
