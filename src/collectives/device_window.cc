// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "collectives/device_window.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "collectives/shared_common.h"

namespace hora {
namespace {

// What a rank publishes in its host region at Open.
struct Published {
  uint64_t pid = 0;
  uint64_t pointer = 0;  // its window, in its device's addresses
  int32_t ordinal = 0;
  int32_t pad = 0;
  gpu::IpcMemHandle handle;
};

// A half: at least 256 bytes, a multiple of 256 (every element size, and
// the 16-byte vectors of the GPU's kernels, divide it).
size_t HalfOf(size_t bytes) {
  const size_t half = bytes / 2 / 256 * 256;
  return half < 256 ? 256 : half;
}

}  // namespace

DeviceWindow::DeviceWindow(Comm& comm, std::shared_ptr<gpu::Device> device, gpu::Stream stream,
                           Duration timeout, Await await)
    : device_(std::move(device)),
      stream_(stream),
      timeout_(timeout),
      await_(std::move(await)),
      rank_(comm.rank()),
      regions_(static_cast<size_t>(comm.size()), nullptr),
      opened_(static_cast<size_t>(comm.size()), false) {}

DeviceWindow::~DeviceWindow() {
  // (The last batch's copies out, queued, read the peers' windows.)
  if (retired_ || (event_.id != 0 && !WaitDevice("closing the GPU window").ok())) {
    Leak();
    return;
  }
  UnmapPeers();
  FreeLocal();
}

void DeviceWindow::Leak() {
  own_ = scratch_ = nullptr;
  event_ = {};
  std::fill(regions_.begin(), regions_.end(), nullptr);
  std::fill(opened_.begin(), opened_.end(), false);
}

Status DeviceWindow::SetUpLocal(size_t bytes) {
  half_bytes_ = HalfOf(bytes);
  HORA_ASSIGN_OR_RETURN(void* own, device_->Allocate(2 * half_bytes_));
  own_ = static_cast<std::byte*>(own);
  regions_[static_cast<size_t>(rank_)] = own_;
  HORA_ASSIGN_OR_RETURN(void* scratch, device_->Allocate(kScratchBytes));
  scratch_ = static_cast<std::byte*>(scratch);
  HORA_ASSIGN_OR_RETURN(event_, device_->CreateEvent());
  HORA_ASSIGN_OR_RETURN(handle_, device_->ExportMemory(own_));
  return Status::Ok();
}

Status DeviceWindow::MapPeers(Comm& comm, size_t half) {
  const SharedWindow& w = *comm.window();
  const auto pid = static_cast<uint64_t>(getpid());
  for (int k = 0; k < comm.size(); ++k) {
    if (k == rank_) continue;
    Published p;
    std::memcpy(&p, w.region(k) + half, sizeof p);
    auto* pointer = reinterpret_cast<std::byte*>(static_cast<uintptr_t>(p.pointer));
    if (p.pid == pid) {
      // A rank of this process: its pointer, where this device reaches it
      // (one CUDA context, or one host device); else its handle (another
      // host device of this process maps it as another process's).
      HORA_ASSIGN_OR_RETURN(const gpu::PointerInfo info, device_->QueryPointer(pointer));
      if (info.kind == gpu::MemoryKind::kDevice) {
        HORA_RETURN_IF_ERROR(device_->EnablePeerAccess(p.ordinal));
        regions_[static_cast<size_t>(k)] = pointer;
        continue;
      }
    }
    Result<void*> opened = device_->OpenMemory(p.handle);
    if (!opened.ok()) {
      return opened.status().WithContext("mapping the GPU window of rank " +
                                         std::to_string(comm.Number(k)));
    }
    regions_[static_cast<size_t>(k)] = static_cast<std::byte*>(*opened);
    opened_[static_cast<size_t>(k)] = true;
  }
  return Status::Ok();
}

void DeviceWindow::UnmapPeers() {
  for (size_t k = 0; k < regions_.size(); ++k) {
    if (opened_[k]) (void)device_->CloseMemory(regions_[k]);
    opened_[k] = false;
    if (static_cast<int>(k) != rank_) regions_[k] = nullptr;
  }
}

void DeviceWindow::FreeLocal() {
  // (Free waits for the device's work on it, as cudaFree does.)
  if (own_ != nullptr) (void)device_->Free(own_);
  if (scratch_ != nullptr) (void)device_->Free(scratch_);
  if (event_.id != 0) (void)device_->DestroyEvent(event_);
  own_ = scratch_ = nullptr;
  event_ = {};
  regions_[static_cast<size_t>(rank_)] = nullptr;
}

Result<std::unique_ptr<DeviceWindow>> DeviceWindow::Open(Comm& comm,
                                                         std::shared_ptr<gpu::Device> device,
                                                         gpu::Stream stream, size_t bytes,
                                                         Duration timeout, bool willing,
                                                         Await await, std::string* why_not) {
  CollectiveScope scope(comm, "GPU window setup", "shared_memory");
  std::unique_ptr<DeviceWindow> dw(
      new DeviceWindow(comm, std::move(device), stream, timeout, std::move(await)));
  SharedWindow& w = *comm.window();
  // Step 1: every rank's window, published with its handle (or why not).
  const size_t half = w.NextHalf() * (w.bytes() / 2);
  Status local = willing ? dw->SetUpLocal(bytes) : UnavailableError("HORA_GPU_IPC=0");
  if (local.ok()) {
    Published p;
    p.pid = static_cast<uint64_t>(getpid());
    p.pointer = reinterpret_cast<uintptr_t>(dw->own_);
    p.ordinal = dw->device_->info().ordinal;
    p.handle = dw->handle_;
    std::memcpy(w.local() + half, &p, sizeof p);
  }
  StepVerdict verdict;
  const auto state = [](const Status& s) { return s.ok() ? RankState::kOk : RankState::kFailed; };
  Status st = SharedFirstStepFlagged(comm, SharedCall::kDeviceWindow, DataType::kUInt8, bytes,
                                     state(local), &verdict);
  if (st.code() == StatusCode::kMismatch) {
    *why_not = "the ranks asked for GPU windows of different sizes (HORA_GPU_WINDOW_BYTES): " +
               st.message();
    return std::unique_ptr<DeviceWindow>();
  }
  HORA_RETURN_IF_ERROR(st);
  if (!verdict.failed.empty()) {
    *why_not = verdict.failed + " did not set up a GPU window (HORA_GPU_IPC=0 there, or its " +
               "device could not)" +
               (local.ok() ? std::string() : "; this rank: " + local.ToString());
    return std::unique_ptr<DeviceWindow>();
  }
  // Step 2: every rank has mapped its peers' windows (or says it failed).
  local = dw->MapPeers(comm, half);
  w.NextHalf();
  HORA_RETURN_IF_ERROR(SharedFirstStepFlagged(comm, SharedCall::kDeviceWindow, DataType::kUInt8,
                                              bytes, state(local), &verdict));
  if (verdict.failed.empty()) return dw;
  *why_not = verdict.failed + " could not map the GPU windows of " +
             (verdict.several ? "their" : "its") + " peers" +
             (local.ok() ? std::string() : "; this rank: " + local.ToString());
  // Nobody frees a window another still maps: unmap, step, then free.
  HORA_RETURN_IF_ERROR(dw->Close(comm));
  return std::unique_ptr<DeviceWindow>();
}

Status DeviceWindow::Close(Comm& comm) {
  // This rank's device finishes with the windows (the last batch's copies
  // out read them), then unmaps them; the step then proves every rank did.
  const bool stuck = retired_ || (event_.id != 0 && !WaitDevice("closing the GPU window").ok());
  if (!stuck) UnmapPeers();
  Status st;
  StepVerdict verdict;
  if (SharedUsable(comm)) {
    CollectiveScope scope(comm, "GPU window teardown", "shared_memory");
    comm.window()->NextHalf();
    st = SharedFirstStepFlagged(comm, SharedCall::kDeviceWindow, DataType::kUInt8, 0,
                                stuck ? RankState::kStuck : RankState::kOk, &verdict);
  }
  if (stuck || verdict.stuck) {
    Leak();  // (a device may still read or write them)
    return st.ok() ? UnavailableError("the GPU windows were left in place: " + verdict.failed +
                                      (verdict.several ? " could not finish their work on them"
                                                       : " could not finish its work on them"))
                   : st;
  }
  FreeLocal();
  return st;
}

Status DeviceWindow::WaitDevice(const char* what) {
  HORA_RETURN_IF_ERROR(device_->Record(event_, stream_));
  return WaitEvent(event_, what);
}

Status DeviceWindow::WaitEvent(gpu::Event event, const char* what) {
  const Status st = await_ ? await_(event, timeout_)
                           : device_->Wait(event, DeadlineAfter(Clock::now(), timeout_));
  return st.ok() ? st : st.WithContext(what);
}

}  // namespace hora
