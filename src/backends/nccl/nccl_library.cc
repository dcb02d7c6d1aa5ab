// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The NCCL library through the seam of nccl.h: libnccl.so.2 dlopened at run
// time (a build with NCCL's headers runs where the library is missing), its
// functions looked up by name, its types from nccl.h. Communicators are made
// non-blocking (ncclConfig_t::blocking = 0) and their init polled, so that a
// peer that never comes is a timeout, not a hang. Compiled only when nccl.h
// is found (else nccl_absent.cc); run only on a GPU.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstring>
#include <thread>

#include "backends/nccl/nccl.h"
#include "hora/build_info.h"

namespace hora {
namespace {

struct Functions {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRankConfig) init_rank_config = nullptr;
  decltype(&ncclCommGetAsyncError) get_async_error = nullptr;
  decltype(&ncclCommAbort) abort = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclReduce) reduce = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
};

Result<ncclDataType_t> NcclType(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8:
      return ncclUint8;
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBFloat16:
      return ncclBfloat16;
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    default:
      return InvalidArgument(std::string("NCCL has no type for ") + DataTypeName(dtype));
  }
}

Result<ncclRedOp_t> NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kProduct:
      return ncclProd;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    default:
      return InvalidArgument(std::string("NCCL is not given ") + ReduceOpName(op));
  }
}

class Library;

class Comm final : public NcclComm {
 public:
  Comm(const Functions& f, ncclComm_t comm, Duration timeout)
      : f_(f), comm_(comm), timeout_(timeout) {}
  ~Comm() override {
    if (comm_ == nullptr) return;
    // A communicator whose work may never end (an error, a lost peer) is
    // aborted; a healthy one destroyed.
    if (AsyncError().ok()) {
      (void)f_.destroy(comm_);
    } else {
      (void)f_.abort(comm_);
    }
  }

  Status AllReduce(const void* in, void* out, size_t count, DataType dtype, ReduceOp op,
                   gpu::Stream s) override {
    HORA_ASSIGN_OR_RETURN(const ncclDataType_t t, NcclType(dtype));
    HORA_ASSIGN_OR_RETURN(const ncclRedOp_t o, NcclOp(op));
    return Queued(f_.all_reduce(in, out, count, t, o, comm_, Native(s)), "ncclAllReduce");
  }

  Status Broadcast(void* data, size_t bytes, int root, gpu::Stream s) override {
    return Queued(f_.broadcast(data, data, bytes, ncclUint8, root, comm_, Native(s)),
                  "ncclBroadcast");
  }

  Status AllGather(const void* in, void* out, size_t bytes, gpu::Stream s) override {
    return Queued(f_.all_gather(in, out, bytes, ncclUint8, comm_, Native(s)), "ncclAllGather");
  }

  Status ReduceScatter(const void* in, void* out, size_t count, DataType dtype, ReduceOp op,
                       gpu::Stream s) override {
    HORA_ASSIGN_OR_RETURN(const ncclDataType_t t, NcclType(dtype));
    HORA_ASSIGN_OR_RETURN(const ncclRedOp_t o, NcclOp(op));
    return Queued(f_.reduce_scatter(in, out, count, t, o, comm_, Native(s)), "ncclReduceScatter");
  }

  Status Reduce(const void* in, void* out, size_t count, DataType dtype, ReduceOp op, int root,
                gpu::Stream s) override {
    HORA_ASSIGN_OR_RETURN(const ncclDataType_t t, NcclType(dtype));
    HORA_ASSIGN_OR_RETURN(const ncclRedOp_t o, NcclOp(op));
    return Queued(f_.reduce(in, out, count, t, o, root, comm_, Native(s)), "ncclReduce");
  }

  Status Send(const void* in, size_t bytes, int peer, gpu::Stream s) override {
    return Queued(f_.send(in, bytes, ncclUint8, peer, comm_, Native(s)), "ncclSend");
  }

  Status Recv(void* out, size_t bytes, int peer, gpu::Stream s) override {
    return Queued(f_.recv(out, bytes, ncclUint8, peer, comm_, Native(s)), "ncclRecv");
  }

  Status GroupStart() override {
    const ncclResult_t rc = f_.group_start();
    return rc == ncclSuccess ? Status::Ok() : Error(rc, "ncclGroupStart");
  }

  // (A non-blocking communicator's group may still be in progress: polled.)
  Status GroupEnd() override { return Queued(f_.group_end(), "ncclGroupEnd"); }

  Status AsyncError() override {
    if (comm_ == nullptr) return AbortedError("NCCL: the communicator was aborted");
    ncclResult_t async = ncclSuccess;
    const ncclResult_t rc = f_.get_async_error(comm_, &async);
    if (rc != ncclSuccess) return Error(rc, "ncclCommGetAsyncError");
    if (async != ncclSuccess && async != ncclInProgress) return Error(async, "NCCL");
    return Status::Ok();
  }

  void Abort() override {
    if (comm_ != nullptr) (void)f_.abort(comm_);
    comm_ = nullptr;
  }

  // Polls a non-blocking call until it is queued (or done), at most the
  // timeout.
  Status Queued(ncclResult_t rc, const char* what) {
    const TimePoint deadline = DeadlineAfter(Clock::now(), timeout_);
    while (rc == ncclInProgress) {
      if (Clock::now() > deadline) {
        return TimeoutError(std::string(what) + " was still in progress after the timeout");
      }
      std::this_thread::yield();
      ncclResult_t async = ncclSuccess;
      rc = f_.get_async_error(comm_, &async);
      if (rc == ncclSuccess) rc = async;
    }
    return rc == ncclSuccess ? Status::Ok() : Error(rc, what);
  }

 private:
  static cudaStream_t Native(gpu::Stream s) {
    return reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(s.id));
  }
  Status Error(ncclResult_t rc, const std::string& what) const {
    return AbortedError(what + ": " + f_.error_string(rc) + " (ncclResult " +
                        std::to_string(static_cast<int>(rc)) + ")");
  }

  const Functions f_;  // (a copy: the library may go first)
  ncclComm_t comm_;
  const Duration timeout_;
};

class Library final : public NcclLibrary {
 public:
  Library(void* handle, const Functions& f, int version)
      : handle_(handle), f_(f), version_(version) {}
  // (The library stays loaded: NCCL's own threads may outlive this object.)

  std::string version() const override {
    return "NCCL " + std::to_string(version_ / 10000) + "." + std::to_string(version_ / 100 % 100) +
           "." + std::to_string(version_ % 100);
  }

  Result<NcclId> UniqueId() override {
    ncclUniqueId native;
    const ncclResult_t rc = f_.get_unique_id(&native);
    if (rc != ncclSuccess) {
      return UnavailableError(std::string("ncclGetUniqueId: ") + f_.error_string(rc));
    }
    static_assert(sizeof native == sizeof(NcclId::bytes));
    NcclId id;
    std::memcpy(id.bytes.data(), &native, sizeof native);
    return id;
  }

  Result<std::unique_ptr<NcclComm>> InitRank(const NcclId& id, int size, int rank,
                                             gpu::Device& device, Duration timeout) override {
    // NCCL works on the calling thread's current GPU.
    int before = 0;
    (void)cudaGetDevice(&before);
    if (const cudaError_t e = cudaSetDevice(device.info().ordinal); e != cudaSuccess) {
      return UnavailableError(std::string("cudaSetDevice: ") + cudaGetErrorString(e));
    }
    ncclUniqueId native;
    std::memcpy(&native, id.bytes.data(), sizeof native);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    const ncclResult_t rc = f_.init_rank_config(&comm, size, native, rank, &config);
    auto made = std::make_unique<Comm>(f_, comm, timeout);
    Status st = rc == ncclSuccess || rc == ncclInProgress
                    ? made->Queued(rc, "ncclCommInitRankConfig")
                    : AbortedError(std::string("ncclCommInitRankConfig: ") + f_.error_string(rc));
    (void)cudaSetDevice(before);
    if (!st.ok()) {
      if (comm != nullptr) made->Abort();
      return st;
    }
    return std::unique_ptr<NcclComm>(std::move(made));
  }

 private:
  void* handle_;
  const Functions f_;
  const int version_;
};

template <typename F>
bool Find(void* handle, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  return *out != nullptr;
}

}  // namespace

int NcclBuiltVersion() { return NCCL_VERSION_CODE; }

Result<std::unique_ptr<NcclLibrary>> OpenNcclLibrary(const std::string& path) {
  const std::string name = path.empty() ? "libnccl.so.2" : path;
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return UnavailableError("NCCL: cannot load " + name + " (" + (why ? why : "?") +
                            "); HORA_NCCL_LIBRARY names it");
  }
  Functions f;
  const bool all =
      Find(handle, "ncclGetVersion", &f.get_version) &&
      Find(handle, "ncclGetUniqueId", &f.get_unique_id) &&
      Find(handle, "ncclCommInitRankConfig", &f.init_rank_config) &&
      Find(handle, "ncclCommGetAsyncError", &f.get_async_error) &&
      Find(handle, "ncclCommAbort", &f.abort) && Find(handle, "ncclCommDestroy", &f.destroy) &&
      Find(handle, "ncclGetErrorString", &f.error_string) &&
      Find(handle, "ncclAllReduce", &f.all_reduce) && Find(handle, "ncclBroadcast", &f.broadcast) &&
      Find(handle, "ncclAllGather", &f.all_gather) &&
      Find(handle, "ncclReduceScatter", &f.reduce_scatter) &&
      Find(handle, "ncclReduce", &f.reduce) && Find(handle, "ncclSend", &f.send) &&
      Find(handle, "ncclRecv", &f.recv) && Find(handle, "ncclGroupStart", &f.group_start) &&
      Find(handle, "ncclGroupEnd", &f.group_end);
  if (!all) {
    dlclose(handle);
    return UnavailableError("NCCL: " + name + " lacks a function Hora needs (NCCL 2.14 or later)");
  }
  int version = 0;
  if (f.get_version(&version) != ncclSuccess) version = 0;
  return std::unique_ptr<NcclLibrary>(new Library(handle, f, version));
}

}  // namespace hora
