// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The device seam (docs/dev/gpu.md, "The device seam"): everything Hora does
// with a GPU goes through this interface -- memory, copies, streams, events,
// pointer attributes and the launch of its kernels. Two implementations:
//  - CudaDevice (cuda/), compiled when the CUDA toolkit is found and run
//    only where a GPU is;
//  - HostDevice (host/), the same interface on CPU memory: device pointers
//    are real addresses that fault if host code touches them, streams are
//    worker threads that run their work in order, events complete when a
//    stream reaches them. Every path above the seam runs in CI through it.
//
// Semantics, as CUDA's:
//  - Work on one stream runs in order, asynchronously to the host: a call
//    that takes a Stream only queues the work and returns.
//  - Record(e, s) captures the work queued on `s` so far; StreamWait(s, e)
//    makes later work on `s` wait for the record current when it is called
//    (an event never recorded is complete).
//  - Copies between host and device memory need pinned host memory
//    (AllocatePinned): an asynchronous copy from pageable memory is not one.
//  - Waits from the host are bounded (Wait's deadline): a GPU that never
//    gets there is a TimeoutError, not a hang.
//  - Errors name the operation, the pointer or sizes, and the device.
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/clock.h"
#include "hora/status.h"
#include "hora/types.h"

namespace hora::gpu {

// A stream of the device (0: none). Work queued on one runs in order. The
// id is the native handle (a cudaStream_t), as DLPack's stream argument
// takes it.
struct Stream {
  uint64_t id = 0;
  friend bool operator==(Stream, Stream) = default;
};

// An event of the device (0: none).
struct Event {
  uint64_t id = 0;
  friend bool operator==(Event, Event) = default;
};

struct DeviceInfo {
  std::string name;  // "NVIDIA H100 80GB HBM3", "host device 0"
  int ordinal = 0;
  int multiprocessors = 1;
  // The GPU's identity on its host, the same for every process that uses it
  // ("GPU-<uuid>"; the host device: one per device object), so that ranks
  // sharing a GPU can be told (NCCL needs one GPU per rank).
  std::string uuid;
};

enum class MemoryKind : uint8_t {
  kHost,    // memory the device knows nothing of (pageable)
  kPinned,  // host memory from AllocatePinned
  kDevice,  // device memory from Allocate
};

// What the device knows of a pointer (QueryPointer).
struct PointerInfo {
  MemoryKind kind = MemoryKind::kHost;
  // The allocation that holds it (kPinned, kDevice): its start and size,
  // and an id unique for the process's lifetime, never reused -- memory
  // freed and allocated again at the same address has a new one.
  uintptr_t base = 0;
  size_t size = 0;
  uint64_t buffer_id = 0;
  // The ordinal of the GPU that holds device memory (-1: not said).
  int device = -1;
};

enum class CopyKind : uint8_t {
  kHostToDevice,    // from pinned memory
  kDeviceToHost,    // to pinned memory
  kDeviceToDevice,  // within the device
};

// An allocation's handle for another process of this host (as CUDA's
// cudaIpcMemHandle_t, 64 bytes): plain bytes, sent as they are.
struct IpcMemHandle {
  std::array<uint8_t, 64> bytes{};
};

// One part of a BatchedCopy: `bytes` from `src` to `dst`, both device memory,
// not overlapping (a GPU's copy of overlapping ranges is undefined; the host
// device's happens to be a memmove, so tests cannot catch it).
struct CopyPart {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
};

class Device {
 public:
  virtual ~Device() = default;

  virtual const DeviceInfo& info() const = 0;

  // Device memory, 256-byte aligned, its contents undefined. A zero-byte
  // allocation is a valid, unique pointer.
  virtual Result<void*> Allocate(size_t bytes) = 0;
  virtual Status Free(void* p) = 0;
  // Host memory the device copies to and from asynchronously.
  virtual Result<void*> AllocatePinned(size_t bytes) = 0;
  virtual Status FreePinned(void* p) = 0;

  virtual Result<Stream> CreateStream() = 0;
  // Waits for the stream's work (as long as it takes), then destroys it.
  virtual Status DestroyStream(Stream s) = 0;
  virtual Result<Event> CreateEvent() = 0;
  virtual Status DestroyEvent(Event e) = 0;
  virtual Status Record(Event e, Stream s) = 0;
  virtual Status StreamWait(Stream s, Event e) = 0;
  // Whether the work the event's last record captured is done (never
  // blocks).
  virtual Result<bool> Query(Event e) = 0;
  // Waits for it until `deadline`: a TimeoutError after.
  virtual Status Wait(Event e, TimePoint deadline) = 0;

  virtual Status Copy(void* dst, const void* src, size_t bytes, CopyKind kind, Stream s) = 0;
  // Many device-to-device copies as one piece of work (a fused batch's
  // tensors into or out of a fusion buffer).
  virtual Status BatchedCopy(std::span<const CopyPart> parts, Stream s) = 0;
  virtual Status Memset(void* dst, uint8_t value, size_t bytes, Stream s) = 0;

  // The driver's view of `p`: a query, as costly as the driver makes it
  // (PointerCache keeps the answers).
  virtual Result<PointerInfo> QueryPointer(const void* p) = 0;

  // Memory shared between the processes of a host (CUDA IPC):
  //  - ExportMemory: the handle of the device allocation that starts at `p`;
  //  - OpenMemory: another process's allocation, from its handle, mapped
  //    into this device's addresses (device memory here, until closed);
  //  - CloseMemory: unmaps what OpenMemory mapped.
  // A handle is good while its allocation lives. A handle of this device's
  // own memory is refused by OpenMemory (use the pointer), as CUDA does.
  virtual Result<IpcMemHandle> ExportMemory(void* p) = 0;
  virtual Result<void*> OpenMemory(const IpcMemHandle& handle) = 0;
  virtual Status CloseMemory(void* p) = 0;
  // Lets this device's work read and write the memory of the device of
  // `ordinal` by its pointers (a rank of this process on another GPU: CUDA
  // peer access, which IPC's OpenMemory enables by itself). A no-op for this
  // device's own ordinal; an error where the two cannot reach each other.
  virtual Status EnablePeerAccess(int ordinal) = 0;

  // Hora's kernels on device memory, in stream order, with the semantics of
  // the CPU's (kernels/reduce.h, kernels/reduction_identity.h):
  //  - Reduce: dst[i] = srcs[0][i] op srcs[1][i] op ... in list order,
  //    rounded to the storage type after each op (float16 and bfloat16
  //    compute in float32); `dst` may be one of `srcs` exactly;
  //  - Scale: dst[i] = src[i] * factor;
  //  - Finalize: average's division and the postscale, as the CPU's.
  virtual Status Reduce(DataType dtype, ReduceOp op, void* dst, std::span<const void* const> srcs,
                        size_t count, Stream s) = 0;
  virtual Status Scale(DataType dtype, double factor, void* dst, const void* src, size_t count,
                       Stream s) = 0;
  virtual Status Finalize(DataType dtype, ReduceOp op, int world_size, double postscale, void* data,
                          size_t count, Stream s) = 0;
};

}  // namespace hora::gpu
