// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "gpu/cuda/cuda_device.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gpu/cuda/cuda_kernels.h"
#include "kernels/reduce.h"

namespace hora::gpu {
namespace {

using PointerAttributesFn = CUresult (*)(unsigned, CUpointer_attribute*, void**, CUdeviceptr);

// A lone part of this many bytes or more is copied by the driver, smaller
// ones by Hora's kernel (BatchedCopy). On an H200 the kernel with one part
// finished sooner up to 1 MiB and with two parts up to 16 MiB, the driver
// at 64 MiB (docs/dev/gpu.md); 32 MiB is between. (One part gets half the
// blocks of two from 4 MiB up: the one-part kernel there is still to time.)
constexpr size_t kDriverCopyFrom = size_t{32} << 20;

cudaStream_t AsCuda(Stream s) { return reinterpret_cast<cudaStream_t>(s.id); }
cudaEvent_t AsCuda(Event e) { return reinterpret_cast<cudaEvent_t>(e.id); }

// Makes a device the calling thread's current one for one call, and puts
// back the one that was current (the framework's choice: a rank's thread
// may be torch's, on its own device) after.
class DeviceScope {
 public:
  explicit DeviceScope(int ordinal) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != ordinal) {
      rc_ = cudaSetDevice(ordinal);
      restore_ = rc_ == cudaSuccess && previous_ >= 0;
    }
  }
  ~DeviceScope() {
    if (restore_) (void)cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  cudaError_t rc() const { return rc_; }

 private:
  int previous_ = -1;
  cudaError_t rc_ = cudaSuccess;
  bool restore_ = false;
};

class CudaDevice final : public Device {
 public:
  CudaDevice(int ordinal, DeviceInfo info, PointerAttributesFn attributes,
             cuda::CopyLauncher copies)
      : ordinal_(ordinal), info_(std::move(info)), attributes_(attributes), copies_(copies) {}

  const DeviceInfo& info() const override { return info_; }

  Result<void*> Allocate(size_t bytes) override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    void* p = nullptr;
    HORA_RETURN_IF_ERROR(Check(cudaMalloc(&p, std::max<size_t>(bytes, 1)),
                               "allocate " + std::to_string(bytes) + " bytes"));
    return p;
  }
  Status Free(void* p) override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    return Check(cudaFree(p), "free");
  }
  Result<void*> AllocatePinned(size_t bytes) override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    void* p = nullptr;
    HORA_RETURN_IF_ERROR(Check(cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocDefault),
                               "allocate " + std::to_string(bytes) + " pinned bytes"));
    return p;
  }
  Status FreePinned(void* p) override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    return Check(cudaFreeHost(p), "free pinned memory");
  }

  Result<Stream> CreateStream() override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    cudaStream_t s = nullptr;
    HORA_RETURN_IF_ERROR(
        Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "create a stream"));
    return Stream{reinterpret_cast<uint64_t>(s)};
  }
  Status DestroyStream(Stream s) override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    HORA_RETURN_IF_ERROR(Check(cudaStreamSynchronize(AsCuda(s)), "drain a stream"));
    return Check(cudaStreamDestroy(AsCuda(s)), "destroy a stream");
  }
  Result<Event> CreateEvent() override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    cudaEvent_t e = nullptr;
    HORA_RETURN_IF_ERROR(
        Check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "create an event"));
    return Event{reinterpret_cast<uint64_t>(e)};
  }
  Status DestroyEvent(Event e) override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    return Check(cudaEventDestroy(AsCuda(e)), "destroy");
  }
  Status Record(Event e, Stream s) override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    return Check(cudaEventRecord(AsCuda(e), AsCuda(s)), "record an event");
  }
  Status StreamWait(Stream s, Event e) override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    return Check(cudaStreamWaitEvent(AsCuda(s), AsCuda(e), 0), "make a stream wait");
  }
  Result<bool> Query(Event e) override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    const cudaError_t rc = cudaEventQuery(AsCuda(e));
    if (rc == cudaErrorNotReady) return false;
    HORA_RETURN_IF_ERROR(Check(rc, "query an event"));
    return true;
  }
  Status Wait(Event e, TimePoint deadline) override {
    // (cudaEventSynchronize has no timeout: poll.) A collective's copies and
    // kernels mostly end within tens of microseconds, and a sleep takes 50 us
    // or more (the kernel's timer slack): the first 200 us ask without
    // sleeping, then the sleeps back off to 1 ms.
    const TimePoint start = Clock::now();
    const TimePoint spin_until = start + std::chrono::microseconds(200);
    auto pause = std::chrono::microseconds(20);
    for (;;) {
      HORA_ASSIGN_OR_RETURN(const bool done, Query(e));
      if (done) return Status::Ok();
      const TimePoint now = Clock::now();
      if (now >= deadline) {
        return TimeoutError("cuda:" + std::to_string(ordinal_) + ": event not complete after " +
                            std::to_string(DurationToSeconds(now - start)) + " s");
      }
      if (now < spin_until) {
        std::this_thread::yield();
        continue;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min<decltype(pause)>(pause * 2, std::chrono::milliseconds(1));
    }
  }

  Status Copy(void* dst, const void* src, size_t bytes, CopyKind kind, Stream s) override {
    if (kind != CopyKind::kDeviceToDevice) {
      // Pageable memory makes an "asynchronous" copy a synchronous one.
      const void* host = kind == CopyKind::kHostToDevice ? src : dst;
      HORA_ASSIGN_OR_RETURN(const PointerInfo info, QueryPointer(host));
      if (info.kind != MemoryKind::kPinned) {
        return InvalidArgument("cuda:" + std::to_string(ordinal_) + ": copy of " +
                               std::to_string(bytes) +
                               " bytes: host memory that is not pinned (AllocatePinned)");
      }
    }
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    const cudaMemcpyKind k = kind == CopyKind::kHostToDevice   ? cudaMemcpyHostToDevice
                             : kind == CopyKind::kDeviceToHost ? cudaMemcpyDeviceToHost
                                                               : cudaMemcpyDeviceToDevice;
    const cudaError_t rc = cudaMemcpyAsync(dst, src, bytes, k, AsCuda(s));
    if (rc == cudaSuccess) return Status::Ok();
    return Check(rc, "copy " + std::to_string(bytes) + " bytes");
  }
  Status BatchedCopy(std::span<const CopyPart> parts, Stream s) override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    if (parts.size() == 1 && parts[0].bytes >= kDriverCopyFrom) {
      // One large part: the driver's copy, which moved 64 MiB 3-4% faster
      // than the kernel on an H200 (hora-gpu-latency, docs/dev/gpu.md).
      return Check(cudaMemcpyAsync(parts[0].dst, parts[0].src, parts[0].bytes,
                                   cudaMemcpyDeviceToDevice, AsCuda(s)),
                   "batched copy");
    }
    for (size_t at = 0; at < parts.size(); at += cuda::kMaxCopyParts) {
      const int n = static_cast<int>(std::min<size_t>(cuda::kMaxCopyParts, parts.size() - at));
      HORA_RETURN_IF_ERROR(Check(
          cuda::LaunchBatchedCopy(parts.data() + at, n, info_.multiprocessors, AsCuda(s), &copies_),
          "batched copy"));
    }
    return Status::Ok();
  }
  Status Memset(void* dst, uint8_t value, size_t bytes, Stream s) override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    return Check(cudaMemsetAsync(dst, value, bytes, AsCuda(s)), "memset");
  }

  Result<PointerInfo> QueryPointer(const void* p) override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    cudaPointerAttributes a{};
    HORA_RETURN_IF_ERROR(Check(cudaPointerGetAttributes(&a, p), "query a pointer"));
    PointerInfo info;
    if (a.type == cudaMemoryTypeHost) {
      info.kind = MemoryKind::kPinned;
    } else if (a.type == cudaMemoryTypeDevice) {
      info.kind = MemoryKind::kDevice;
      info.device = a.device;
    } else {
      return info;  // unregistered host memory; managed memory is not taken as a GPU's
    }
    CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_BUFFER_ID};
    CUdeviceptr base = 0;
    size_t size = 0;
    unsigned long long id = 0;
    void* data[] = {&base, &size, &id};
    const CUresult rc =
        attributes_(3, which, data, static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)));
    if (rc != CUDA_SUCCESS) {
      return UnavailableError("cuda:" + std::to_string(ordinal_) +
                              ": cuPointerGetAttributes failed (" + std::to_string(rc) + ")");
    }
    info.base = static_cast<uintptr_t>(base);
    info.size = size;
    info.buffer_id = id;
    return info;
  }

  Result<IpcMemHandle> ExportMemory(void* p) override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    cudaIpcMemHandle_t native{};
    HORA_RETURN_IF_ERROR(Check(cudaIpcGetMemHandle(&native, p), "export memory (IPC)"));
    static_assert(sizeof native == sizeof(IpcMemHandle::bytes));
    IpcMemHandle h;
    std::memcpy(h.bytes.data(), &native, sizeof native);
    return h;
  }

  Result<void*> OpenMemory(const IpcMemHandle& handle) override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    cudaIpcMemHandle_t native;
    std::memcpy(&native, handle.bytes.data(), sizeof native);
    void* p = nullptr;
    HORA_RETURN_IF_ERROR(Check(cudaIpcOpenMemHandle(&p, native, cudaIpcMemLazyEnablePeerAccess),
                               "open another process's memory (IPC)"));
    return p;
  }

  Status CloseMemory(void* p) override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    return Check(cudaIpcCloseMemHandle(p), "close another process's memory (IPC)");
  }

  Status EnablePeerAccess(int ordinal) override {
    if (ordinal == ordinal_) return Status::Ok();
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    int can = 0;
    HORA_RETURN_IF_ERROR(Check(cudaDeviceCanAccessPeer(&can, ordinal_, ordinal),
                               "ask whether cuda:" + std::to_string(ordinal) + " is reachable"));
    if (can == 0) {
      return UnavailableError("cuda:" + std::to_string(ordinal_) +
                              " cannot reach the memory of cuda:" + std::to_string(ordinal) +
                              " (no peer access between them)");
    }
    const cudaError_t rc = cudaDeviceEnablePeerAccess(ordinal, 0);
    if (rc == cudaErrorPeerAccessAlreadyEnabled) {
      (void)cudaGetLastError();  // (clears it: not sticky)
      return Status::Ok();
    }
    return Check(rc, "enable peer access to cuda:" + std::to_string(ordinal));
  }

  Status Reduce(DataType dtype, ReduceOp op, void* dst, std::span<const void* const> srcs,
                size_t count, Stream s) override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    if (srcs.empty()) return InvalidArgument("cuda reduce of no sources");
    // The first launch folds up to kMaxReduceSources into the accumulator;
    // each further one folds it with the next ones (it first: the same
    // order). The accumulator is dst, unless dst is a source a later launch
    // still reads: then a stream-ordered scratch, copied to dst at the end.
    const std::string what = std::string("reduce (") + ReduceOpName(op) + ")";
    void* acc = dst;
    for (size_t k = cuda::kMaxReduceSources; k < srcs.size(); ++k) {
      if (srcs[k] == dst) acc = nullptr;
    }
    const size_t bytes = count * DataTypeSize(dtype);
    if (acc == nullptr) {
      HORA_RETURN_IF_ERROR(Check(cudaMallocAsync(&acc, std::max<size_t>(bytes, 1), AsCuda(s)),
                                 what + ": scratch of " + std::to_string(bytes) + " bytes"));
    }
    std::vector<const void*> batch(
        srcs.begin(), srcs.begin() + std::min<size_t>(srcs.size(), cuda::kMaxReduceSources));
    size_t next = batch.size();
    Status st;
    for (;;) {
      st = Check(cuda::LaunchReduce(dtype, op, acc, batch.data(), static_cast<int>(batch.size()),
                                    count, info_.multiprocessors, AsCuda(s)),
                 what);
      if (!st.ok() || next == srcs.size()) break;
      batch.assign(1, acc);
      while (next < srcs.size() && batch.size() < cuda::kMaxReduceSources) {
        batch.push_back(srcs[next++]);
      }
    }
    if (acc != dst) {
      if (st.ok()) {
        st = Check(cudaMemcpyAsync(dst, acc, bytes, cudaMemcpyDeviceToDevice, AsCuda(s)), what);
      }
      const Status freed = Check(cudaFreeAsync(acc, AsCuda(s)), what + ": free its scratch");
      if (st.ok()) st = freed;
    }
    return st;
  }
  Status Scale(DataType dtype, double factor, void* dst, const void* src, size_t count,
               Stream s) override {
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    return Check(
        cuda::LaunchScale(dtype, factor, dst, src, count, info_.multiprocessors, AsCuda(s)),
        "scale");
  }
  Status Finalize(DataType dtype, ReduceOp op, int world_size, double postscale, void* data,
                  size_t count, Stream s) override {
    // As kernels::Finalize: floats scale once by postscale / world_size;
    // integers divide toward zero, then scale by postscale.
    if (!kernels::NeedsFinalize(dtype, op, world_size, postscale)) return Status::Ok();
    const bool average = op == ReduceOp::kAverage && world_size != 1;
    const bool floating = dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ||
                          dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
    if (floating)
      return Scale(dtype, average ? postscale / world_size : postscale, data, data, count, s);
    const DeviceScope on(ordinal_);
    HORA_RETURN_IF_ERROR(Check(on.rc(), "select the device"));
    if (average) {
      HORA_RETURN_IF_ERROR(Check(
          cuda::LaunchDivideInt(dtype, world_size, data, count, info_.multiprocessors, AsCuda(s)),
          "average"));
    }
    return postscale != 1.0 ? Scale(dtype, postscale, data, data, count, s) : Status::Ok();
  }

 private:
  // (`what` is a view: the calls that succeed, nearly all, build no string.)
  Status Check(cudaError_t rc, std::string_view what) const {
    if (rc == cudaSuccess) return Status::Ok();
    const std::string text = "cuda:" + std::to_string(ordinal_) + ": " + std::string(what) + ": " +
                             cudaGetErrorName(rc) + " (" + std::to_string(static_cast<int>(rc)) +
                             "): " + cudaGetErrorString(rc);
    if (rc == cudaErrorMemoryAllocation) return UnavailableError(text);
    if (rc == cudaErrorInvalidValue) return InvalidArgument(text);
    return AbortedError(text);  // (launch failures, illegal addresses: sticky)
  }

  const int ordinal_;
  const DeviceInfo info_;
  const PointerAttributesFn attributes_;
  const cuda::CopyLauncher copies_;
};

}  // namespace

Result<std::unique_ptr<Device>> OpenCudaDevice(int ordinal) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    // 34 (a stub driver), 35 (no driver, or too old), 100 (no device).
    return UnavailableError(std::string("no usable GPU: ") + cudaGetErrorName(rc) + " (" +
                            std::to_string(static_cast<int>(rc)) + "): " + cudaGetErrorString(rc));
  }
  if (ordinal < 0 || ordinal >= count) {
    return UnavailableError("no GPU " + std::to_string(ordinal) + ": this machine has " +
                            std::to_string(count));
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) {
    return UnavailableError("GPU " + std::to_string(ordinal) + ": cannot read its properties");
  }
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &fn, 7000, cudaEnableDefault,
                                       &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || fn == nullptr) {
    return UnavailableError("GPU " + std::to_string(ordinal) +
                            ": the driver has no cuPointerGetAttributes");
  }
  std::string uuid = "GPU-";
  for (int i = 0; i < 16; ++i) {
    static constexpr char kHex[] = "0123456789abcdef";
    const auto b = static_cast<unsigned char>(prop.uuid.bytes[i]);
    uuid += kHex[b >> 4];
    uuid += kHex[b & 15];
  }
  DeviceInfo info{prop.name, ordinal, prop.multiProcessorCount, std::move(uuid)};
  // (Without the driver's functions the copies launch through the runtime:
  // the same work, a little more of the host's time per launch.)
  cuda::CopyLauncher copies;
  {
    const DeviceScope on(ordinal);
    if (on.rc() == cudaSuccess) (void)cuda::OpenCopyLauncher(&copies);
  }
  return std::unique_ptr<Device>(
      new CudaDevice(ordinal, std::move(info), reinterpret_cast<PointerAttributesFn>(fn), copies));
}

}  // namespace hora::gpu
