// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "doubles/host_device.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/reduce.h"

namespace hora::gpu {
namespace {

const char* CopyName(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice:
      return "host to device";
    case CopyKind::kDeviceToHost:
      return "device to host";
    case CopyKind::kDeviceToDevice:
      return "device to device";
  }
  return "?";
}

// The elements Reduce folds at a time through its scratch (aliasing-safe:
// every source's chunk is read before the destination's is written).
constexpr size_t kReduceChunkBytes = 16 << 10;

}  // namespace

struct HostDevice::HostEvent {
  Mutex mu;
  std::condition_variable cv;
  uint64_t recorded HORA_GUARDED_BY(mu) = 0;   // records queued
  uint64_t completed HORA_GUARDED_BY(mu) = 0;  // the latest a stream reached
};

Result<std::unique_ptr<HostDevice>> HostDevice::Create(int ordinal, size_t span) {
  HORA_ASSIGN_OR_RETURN(std::unique_ptr<HostMemory> memory, HostMemory::Create(span));
  return std::unique_ptr<HostDevice>(new HostDevice(ordinal, std::move(memory)));
}

HostDevice::HostDevice(int ordinal, std::unique_ptr<HostMemory> memory)
    : info_{"host device " + std::to_string(ordinal), ordinal, 1,
            // (unique while it lives: its memory's addresses are its own)
            "host-" + std::to_string(getpid()) + "-" + PointerText(memory.get())},
      memory_(std::move(memory)) {}

HostDevice::~HostDevice() {
  ReleaseCopies();  // (held copies would wait out their bound)
  std::map<uint64_t, std::shared_ptr<HostStream>> streams;
  {
    MutexLock lock(mu_);
    streams.swap(streams_);
  }
  streams.clear();  // each runs what it has queued
}

Result<void*> HostDevice::Allocate(size_t bytes) { return memory_->Allocate(bytes); }

Status HostDevice::Free(void* p) {
  DrainAll();  // (as cudaFree: no queued work uses it after)
  return memory_->Free(p);
}

Result<void*> HostDevice::AllocatePinned(size_t bytes) { return memory_->AllocatePinned(bytes); }

Status HostDevice::FreePinned(void* p) {
  DrainAll();
  return memory_->FreePinned(p);
}

Result<Stream> HostDevice::CreateStream() {
  auto stream = std::make_unique<HostStream>();
  MutexLock lock(mu_);
  const uint64_t id = next_id_++;
  streams_[id] = std::move(stream);
  return Stream{id};
}

Status HostDevice::DestroyStream(Stream s) {
  std::shared_ptr<HostStream> stream;
  {
    MutexLock lock(mu_);
    auto it = streams_.find(s.id);
    if (it == streams_.end())
      return InvalidArgument("host device: no stream " + std::to_string(s.id));
    stream = std::move(it->second);
    streams_.erase(it);
  }
  stream->Drain();  // (device.h: waits for its work, though DrainAll may hold it a while)
  stream.reset();
  return Status::Ok();
}

Result<Event> HostDevice::CreateEvent() {
  events_created_.fetch_add(1, std::memory_order_relaxed);
  MutexLock lock(mu_);
  const uint64_t id = next_id_++;
  events_[id] = std::make_shared<HostEvent>();
  return Event{id};
}

Status HostDevice::DestroyEvent(Event e) {
  MutexLock lock(mu_);
  if (events_.erase(e.id) == 0) {
    return InvalidArgument("host device: no event " + std::to_string(e.id));
  }
  return Status::Ok();
}

std::shared_ptr<HostStream> HostDevice::FindStream(Stream s) {
  MutexLock lock(mu_);
  auto it = streams_.find(s.id);
  return it == streams_.end() ? nullptr : it->second;
}

std::shared_ptr<HostDevice::HostEvent> HostDevice::FindEvent(Event e) {
  MutexLock lock(mu_);
  auto it = events_.find(e.id);
  return it == events_.end() ? nullptr : it->second;
}

void HostDevice::DrainAll() {
  // (Held, so that a stream another thread destroys meanwhile stays.)
  std::vector<std::shared_ptr<HostStream>> all;
  {
    MutexLock lock(mu_);
    for (auto& [id, s] : streams_) all.push_back(s);
  }
  for (const std::shared_ptr<HostStream>& s : all) s->Drain();
}

Status HostDevice::Broken() const {
  if (!broken_.load()) return Status::Ok();
  return InternalError(info_.name +
                       ": a device-to-device copy faulted on the device (injected for a test); "
                       "the device is unusable from now on, as a GPU is after such a fault");
}

std::function<void()> HostDevice::Guarded(std::function<void()> work, bool fault) {
  return [this, work = std::move(work), fault] {
    if (fault) broken_.store(true);
    if (!broken_.load()) work();
  };
}

Status HostDevice::Record(Event e, Stream s) {
  HORA_RETURN_IF_ERROR(Broken());
  std::shared_ptr<HostEvent> ev = FindEvent(e);
  std::shared_ptr<HostStream> stream = FindStream(s);
  if (ev == nullptr || stream == nullptr) {
    return InvalidArgument("host device: record of event " + std::to_string(e.id) + " on stream " +
                           std::to_string(s.id) + ": no such " + (ev ? "stream" : "event"));
  }
  uint64_t gen;
  {
    MutexLock lock(ev->mu);
    gen = ++ev->recorded;
  }
  stream->Enqueue([ev, gen] {
    {
      MutexLock lock(ev->mu);
      ev->completed = std::max(ev->completed, gen);
    }
    ev->cv.notify_all();
  });
  return Status::Ok();
}

Status HostDevice::StreamWait(Stream s, Event e) {
  HORA_RETURN_IF_ERROR(Broken());
  std::shared_ptr<HostEvent> ev = FindEvent(e);
  std::shared_ptr<HostStream> stream = FindStream(s);
  if (ev == nullptr || stream == nullptr) {
    return InvalidArgument("host device: wait of stream " + std::to_string(s.id) + " for event " +
                           std::to_string(e.id) + ": no such " + (ev ? "stream" : "event"));
  }
  uint64_t gen;
  {
    MutexLock lock(ev->mu);
    gen = ev->recorded;  // the record current now, not a later one
  }
  if (gen == 0) return Status::Ok();  // never recorded: complete
  stream->Enqueue([ev, gen] {
    MutexLock lock(ev->mu);
    ev->cv.wait(lock.native(), [&]() HORA_NO_THREAD_SAFETY_ANALYSIS {  // (ev->mu is held)
      return ev->completed >= gen;
    });
  });
  return Status::Ok();
}

Result<bool> HostDevice::Query(Event e) {
  std::shared_ptr<HostEvent> ev = FindEvent(e);
  if (ev == nullptr) return InvalidArgument("host device: no event " + std::to_string(e.id));
  HORA_RETURN_IF_ERROR(Broken());
  MutexLock lock(ev->mu);
  return ev->completed >= ev->recorded;
}

Status HostDevice::Wait(Event e, TimePoint deadline) {
  std::shared_ptr<HostEvent> ev = FindEvent(e);
  if (ev == nullptr) return InvalidArgument("host device: no event " + std::to_string(e.id));
  MutexLock lock(ev->mu);
  const uint64_t gen = ev->recorded;
  const TimePoint start = Clock::now();
  if (!ev->cv.wait_until(lock.native(), deadline, [&]() HORA_NO_THREAD_SAFETY_ANALYSIS {
        return ev->completed >= gen;  // (ev->mu is held)
      })) {
    HORA_RETURN_IF_ERROR(Broken());
    return TimeoutError("host device: event " + std::to_string(e.id) + " not complete after " +
                        std::to_string(DurationToSeconds(Clock::now() - start)) + " s");
  }
  return Broken();
}

Result<std::byte*> HostDevice::DeviceBytes(const void* p, size_t bytes, const char* what) const {
  std::byte* b = memory_->Translate(p, bytes);
  if (b == nullptr) {
    return InvalidArgument("host device: " + std::string(what) + " " + PointerText(p) + " (" +
                           std::to_string(bytes) + " bytes) is not inside one device allocation");
  }
  return b;
}

// A hold on copies of one kind (HoldCopies): open once released.
struct HostDevice::CopyHold {
  CopyHold(CopyKind k, size_t p) : kind(k), pass(p) {}
  void Await() HORA_EXCLUDES(mu) {
    MutexLock lock(mu);
    (void)released.wait_for(lock.native(), std::chrono::seconds(60),
                            [&]() HORA_REQUIRES(mu) { return open; });
  }
  void Release() HORA_EXCLUDES(mu) {
    {
      MutexLock lock(mu);
      open = true;
    }
    released.notify_all();
  }
  const CopyKind kind;
  size_t pass;  // (under HostDevice::mu_)
  Mutex mu;
  std::condition_variable released;
  bool open HORA_GUARDED_BY(mu) = false;
};

void HostDevice::HoldCopies(CopyKind kind, size_t pass) {
  std::shared_ptr<CopyHold> ended;
  {
    MutexLock lock(mu_);
    ended = std::move(copy_hold_);
    copy_hold_ = std::make_shared<CopyHold>(kind, pass);
  }
  if (ended != nullptr) ended->Release();
}

void HostDevice::ReleaseCopies() {
  std::shared_ptr<CopyHold> ended;
  {
    MutexLock lock(mu_);
    ended = std::move(copy_hold_);
  }
  if (ended != nullptr) ended->Release();
}

Status HostDevice::Copy(void* dst, const void* src, size_t bytes, CopyKind kind, Stream s) {
  copies_[static_cast<size_t>(kind)].fetch_add(1);
  HORA_RETURN_IF_ERROR(Broken());
  std::shared_ptr<HostStream> stream = FindStream(s);
  if (stream == nullptr) return InvalidArgument("host device: no stream " + std::to_string(s.id));
  const std::string what =
      std::string("copy ") + CopyName(kind) + " of " + std::to_string(bytes) + " bytes";
  void* to = dst;
  const void* from = src;
  auto pinned = [&](const void* p, const char* side) -> Status {
    if (memory_->IsPinned(p, bytes)) return Status::Ok();
    return InvalidArgument("host device: " + what + ": the " + side + " " + PointerText(p) +
                           " is not pinned memory (AllocatePinned): an asynchronous copy "
                           "needs it");
  };
  switch (kind) {
    case CopyKind::kHostToDevice: {
      HORA_RETURN_IF_ERROR(pinned(src, "source"));
      HORA_ASSIGN_OR_RETURN(to, DeviceBytes(dst, bytes, (what + ": the destination").c_str()));
      break;
    }
    case CopyKind::kDeviceToHost: {
      HORA_RETURN_IF_ERROR(pinned(dst, "destination"));
      HORA_ASSIGN_OR_RETURN(from, DeviceBytes(src, bytes, (what + ": the source").c_str()));
      break;
    }
    case CopyKind::kDeviceToDevice: {
      HORA_ASSIGN_OR_RETURN(to, DeviceBytes(dst, bytes, (what + ": the destination").c_str()));
      HORA_ASSIGN_OR_RETURN(from, DeviceBytes(src, bytes, (what + ": the source").c_str()));
      break;
    }
  }
  const Duration delay(kind == CopyKind::kHostToDevice ? to_device_delay_ns_.load() : 0);
  const bool fault = kind == CopyKind::kDeviceToDevice && bytes > 0 && fault_armed_.exchange(false);
  std::shared_ptr<CopyHold> hold;
  if (bytes > 0) {
    MutexLock lock(mu_);
    if (copy_hold_ != nullptr && copy_hold_->kind == kind) {
      if (copy_hold_->pass > 0) {
        --copy_hold_->pass;
      } else {
        hold = copy_hold_;
      }
    }
  }
  if (bytes > 0) {
    stream->Enqueue(Guarded(
        [to, from, bytes, delay, hold] {
          if (delay > Duration::zero()) std::this_thread::sleep_for(delay);
          if (hold != nullptr) hold->Await();
          std::memmove(to, from, bytes);
        },
        fault));
  }
  return Status::Ok();
}

Status HostDevice::BatchedCopy(std::span<const CopyPart> parts, Stream s) {
  batched_copies_.fetch_add(1);
  HORA_RETURN_IF_ERROR(Broken());
  std::shared_ptr<HostStream> stream = FindStream(s);
  if (stream == nullptr) return InvalidArgument("host device: no stream " + std::to_string(s.id));
  std::vector<CopyPart> moves;
  moves.reserve(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    const CopyPart& p = parts[i];
    const std::string what = "batched copy, part " + std::to_string(i) + ":";
    HORA_ASSIGN_OR_RETURN(std::byte * to,
                          DeviceBytes(p.dst, p.bytes, (what + " destination").c_str()));
    HORA_ASSIGN_OR_RETURN(std::byte * from,
                          DeviceBytes(p.src, p.bytes, (what + " source").c_str()));
    moves.push_back({to, from, p.bytes});
  }
  stream->Enqueue(Guarded(
      [moves = std::move(moves)] {
        for (const CopyPart& m : moves) std::memmove(m.dst, m.src, m.bytes);
      },
      !parts.empty() && fault_armed_.exchange(false)));
  return Status::Ok();
}

Status HostDevice::Memset(void* dst, uint8_t value, size_t bytes, Stream s) {
  HORA_RETURN_IF_ERROR(Broken());
  std::shared_ptr<HostStream> stream = FindStream(s);
  if (stream == nullptr) return InvalidArgument("host device: no stream " + std::to_string(s.id));
  HORA_ASSIGN_OR_RETURN(std::byte * to, DeviceBytes(dst, bytes, "memset destination"));
  stream->Enqueue(Guarded([to, value, bytes] { std::memset(to, value, bytes); }));
  return Status::Ok();
}

Status HostDevice::RunOnStream(Stream s, std::function<void()> work) {
  HORA_RETURN_IF_ERROR(Broken());
  std::shared_ptr<HostStream> stream = FindStream(s);
  if (stream == nullptr) return InvalidArgument("host device: no stream " + std::to_string(s.id));
  stream->Enqueue(Guarded(std::move(work)));
  return Status::Ok();
}

Result<IpcMemHandle> HostDevice::ExportMemory(void* p) { return memory_->Export(p); }

Result<void*> HostDevice::OpenMemory(const IpcMemHandle& handle) { return memory_->Open(handle); }

Status HostDevice::CloseMemory(void* p) {
  DrainAll();  // (no queued work reads it after)
  return memory_->Close(p);
}

Result<PointerInfo> HostDevice::QueryPointer(const void* p) {
  pointer_queries_.fetch_add(1, std::memory_order_relaxed);
  return memory_->Find(p);
}

Status HostDevice::Reduce(DataType dtype, ReduceOp op, void* dst, std::span<const void* const> srcs,
                          size_t count, Stream s) {
  HORA_RETURN_IF_ERROR(Broken());
  std::shared_ptr<HostStream> stream = FindStream(s);
  if (stream == nullptr) return InvalidArgument("host device: no stream " + std::to_string(s.id));
  if (op == ReduceOp::kAverage || op == ReduceOp::kAdasum || srcs.empty()) {
    return InvalidArgument(std::string("host device: reduce with ") + ReduceOpName(op) + " of " +
                           std::to_string(srcs.size()) +
                           " sources (average is a sum then Finalize; adasum is not a kernel)");
  }
  const size_t bytes = count * DataTypeSize(dtype);
  HORA_ASSIGN_OR_RETURN(std::byte * out, DeviceBytes(dst, bytes, "reduce destination"));
  std::vector<const std::byte*> in;
  in.reserve(srcs.size());
  for (const void* src : srcs) {
    HORA_ASSIGN_OR_RETURN(std::byte * b, DeviceBytes(src, bytes, "reduce source"));
    in.push_back(b);
  }
  stream->Enqueue(Guarded([dtype, op, out, in = std::move(in), count] {
    const size_t size = DataTypeSize(dtype);
    const size_t chunk = std::max<size_t>(1, kReduceChunkBytes / size);
    std::vector<std::byte> acc(chunk * size);
    for (size_t at = 0; at < count; at += chunk) {
      const size_t n = std::min(chunk, count - at);
      std::memcpy(acc.data(), in[0] + at * size, n * size);
      for (size_t k = 1; k < in.size(); ++k) {
        kernels::Reduce(dtype, op, acc.data(), in[k] + at * size, n);
      }
      std::memcpy(out + at * size, acc.data(), n * size);
    }
  }));
  return Status::Ok();
}

Status HostDevice::Scale(DataType dtype, double factor, void* dst, const void* src, size_t count,
                         Stream s) {
  HORA_RETURN_IF_ERROR(Broken());
  std::shared_ptr<HostStream> stream = FindStream(s);
  if (stream == nullptr) return InvalidArgument("host device: no stream " + std::to_string(s.id));
  const size_t bytes = count * DataTypeSize(dtype);
  HORA_ASSIGN_OR_RETURN(std::byte * out, DeviceBytes(dst, bytes, "scale destination"));
  HORA_ASSIGN_OR_RETURN(std::byte * in, DeviceBytes(src, bytes, "scale source"));
  stream->Enqueue(Guarded([=] { kernels::Scale(dtype, factor, out, in, count); }));
  return Status::Ok();
}

Status HostDevice::Finalize(DataType dtype, ReduceOp op, int world_size, double postscale,
                            void* data, size_t count, Stream s) {
  HORA_RETURN_IF_ERROR(Broken());
  std::shared_ptr<HostStream> stream = FindStream(s);
  if (stream == nullptr) return InvalidArgument("host device: no stream " + std::to_string(s.id));
  HORA_ASSIGN_OR_RETURN(std::byte * at,
                        DeviceBytes(data, count * DataTypeSize(dtype), "finalize data"));
  stream->Enqueue(Guarded([=] { kernels::Finalize(dtype, op, world_size, postscale, at, count); }));
  return Status::Ok();
}

}  // namespace hora::gpu
