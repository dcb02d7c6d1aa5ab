// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "device/device_nccl.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/allreduce_common.h"
#include "kernels/reduce.h"

namespace hora {
namespace {

// What each rank says at the communicator's making (the same size on every
// rank, for the backend's Allgatherv).
struct Said {
  uint8_t ok = 0;  // the library loaded (and, rank 0, gave an id)
  char why[223] = {};
  char uuid[64] = {};
  NcclId id;  // rank 0's
};

void Put(char* to, size_t n, const std::string& s) {
  std::memset(to, 0, n);
  std::memcpy(to, s.data(), std::min(n - 1, s.size()));
}

bool IsHostDevice(const gpu::Device& d) { return d.info().uuid.rfind("host-", 0) == 0; }

// Whether NCCL takes `m`'s collective: the routing lets it, and it has the
// collective (a reduction: of its dtype and op).
bool TakesCollective(const RequestMeta& m, const GpuRouting& routing) {
  if (routing.nccl == NcclMode::kHora) return false;
  switch (m.op) {
    case OpType::kAllreduce:
    case OpType::kReducescatter:
      return NcclTakes(m.dtype, ReducingOp(m.reduction.op));
    case OpType::kBroadcast:
    case OpType::kAllgather:
    case OpType::kAlltoall:
      return true;
    default:
      return false;
  }
}

}  // namespace

DeviceNccl::DeviceNccl(std::shared_ptr<gpu::Device> device, gpu::Stream stream, Duration timeout,
                       Settings settings)
    : device_(std::move(device)),
      stream_(stream),
      timeout_(timeout),
      settings_(std::move(settings)) {}

DeviceNccl::~DeviceNccl() {
  Abort("the engine ended");
  library_.reset();
}

void DeviceNccl::Abort(const std::string& why) {
  if (!comm_) return;
  if (on_abort_) on_abort_(why);
  comm_->Abort();
  comm_.reset();
  if (broken_.ok()) broken_ = AbortedError("the NCCL communicator was aborted: " + why);
}

Status DeviceNccl::AsyncError() const { return comm_ ? comm_->AsyncError() : Status::Ok(); }

void DeviceNccl::Restart(const std::string& why) {
  Abort(why);
  if (settings_.logger != nullptr && tried_ && unusable_.ok()) {
    settings_.logger->Warning("NCCL's communicator is made again at the next NCCL batch: " + why);
  }
  tried_ = false;
  unusable_ = Status::Ok();
  broken_ = Status::Ok();
}

void DeviceNccl::AbortIfBroken(const Status& failed) {
  // A call that failed, whatever the reason, may be queued on the other
  // ranks and not here: the communicator's sequence of calls is no longer
  // the same everywhere. (This rank says so at its next NCCL batch, and
  // every rank makes a new one: batch_verdict.h.)
  Abort(failed.ToString());
}

bool DeviceNccl::Wants(const RequestMeta& m, size_t bytes, bool joined_any) const {
  const GpuRouting& routing = settings_.routing;
  if (joined_any || !TakesCollective(m, routing)) return false;
  return routing.nccl == NcclMode::kNccl || bytes >= routing.nccl_min_bytes;
}

bool DeviceNccl::MayTake(const RequestMeta& m, int size, const GpuRouting& routing) {
  if (m.device != DeviceType::kCUDA || !TakesCollective(m, routing)) return false;
  // (A set of one rank keeps its allreduces and broadcasts on its GPU
  // unless HORA_GPU_BACKEND=nccl: device_staging_one_rank.cc.)
  return size > 1 || routing.nccl == NcclMode::kNccl ||
         (m.op != OpType::kAllreduce && m.op != OpType::kBroadcast);
}

Result<NcclOrder::Turn> DeviceNccl::AwaitTurn(const std::vector<TensorRecord*>& batch, int rank) {
  if (settings_.order == nullptr) return NcclOrder::Turn();
  numbers_.clear();
  for (const TensorRecord* p : batch) numbers_.push_back(p->nccl_number);
  const RequestMeta& m = batch.front()->meta;
  NcclOrder::Wait wait{settings_.turn_timeout, settings_.warn_every, settings_.logger, [&] {
                         std::string what = "rank " + std::to_string(rank) + ": " +
                                            OpTypeName(m.op) + " '" + m.name + "'";
                         if (!settings_.label.empty()) what += " of " + settings_.label;
                         return what;
                       }};
  return settings_.order->Await(settings_.set, numbers_, wait);
}

Result<bool> DeviceNccl::Ready(CollectiveBackend& data, int rank, int size) {
  const bool required = settings_.routing.nccl == NcclMode::kNccl;
  if (!tried_) {
    tried_ = true;
    unusable_ = MakeCommunicator(data, rank, size);
    if (!unusable_.ok() && !required && settings_.logger != nullptr) {
      // (auto: Hora's own paths are what it falls back on, as meant)
      settings_.logger->Info("GPU collectives go without NCCL: " + unusable_.message());
    }
    if (unusable_.ok() && settings_.logger != nullptr) {
      settings_.logger->Info("GPU collectives by " + library_->version());
    }
  }
  // (An error NCCL reported meanwhile leaves the communicator broken too.)
  if (const Status e = AsyncError(); !e.ok()) Abort("NCCL reported an error: " + e.ToString());
  // (A communicator aborted on an error: this batch fails, and this rank
  // says so before the others' calls: batch_verdict.h, Restart.)
  if (!broken_.ok()) return broken_;
  if (comm_) return true;
  if (required) return unusable_.WithContext("HORA_GPU_BACKEND=nccl, but NCCL cannot be used");
  return false;
}

Status DeviceNccl::LoadLibrary() {
  if (library_) return Status::Ok();  // (kept when the communicator is made again)
  const bool host = settings_.nccl.on_host_device;
  if (host && !IsHostDevice(*device_)) {
    return InvalidArgument(
        "HORA_NCCL_LIBRARY=host runs on the host device only (HORA_DEVICE=host)");
  }
  if (!host && IsHostDevice(*device_)) {
    return UnavailableError(
        "the host device has no NCCL (HORA_NCCL_LIBRARY=host stands in for it)");
  }
  if (!settings_.nccl.open) return UnavailableError("no NCCL was given to this engine");
  Result<std::unique_ptr<NcclLibrary>> lib = settings_.nccl.open();
  HORA_RETURN_IF_ERROR(lib.status());
  library_ = std::move(*lib);
  return Status::Ok();
}

Status DeviceNccl::MakeCommunicator(CollectiveBackend& data, int rank, int size) {
  Said mine;
  Status local = LoadLibrary();
  if (local.ok() && rank == 0) {
    Result<NcclId> id = library_->UniqueId();
    if (id.ok()) {
      mine.id = *id;
    } else {
      local = id.status();
    }
  }
  mine.ok = local.ok() ? 1 : 0;
  Put(mine.why, sizeof mine.why, local.ok() ? std::string() : local.message());
  Put(mine.uuid, sizeof mine.uuid, device_->info().uuid);
  std::vector<Said> all(static_cast<size_t>(size));
  const std::vector<size_t> bytes(static_cast<size_t>(size), sizeof(Said));
  HORA_RETURN_IF_ERROR(data.Allgatherv(&mine, all.data(), bytes));
  // Every rank reads the same records: the same verdict everywhere.
  std::string why;
  for (int k = 0; k < size; ++k) {
    const Said& s = all[static_cast<size_t>(k)];
    if (s.ok == 0) why += (why.empty() ? "rank " : "; rank ") + std::to_string(k) + ": " + s.why;
  }
  if (!why.empty()) return UnavailableError(why);
  for (int a = 0; a < size; ++a) {
    for (int b = a + 1; b < size; ++b) {
      if (std::strncmp(all[static_cast<size_t>(a)].uuid, all[static_cast<size_t>(b)].uuid,
                       sizeof mine.uuid) == 0) {
        return UnavailableError("ranks " + std::to_string(a) + " and " + std::to_string(b) +
                                " both use GPU " + all[static_cast<size_t>(a)].uuid +
                                "; NCCL needs one GPU per rank");
      }
    }
  }
  // (Half the timeout: a rank whose init fails must reach the next step
  // before the others' wait for it ends.)
  Result<std::unique_ptr<NcclComm>> comm =
      library_->InitRank(all[0].id, size, rank, *device_, timeout_ / 2);
  uint8_t made = comm.ok() ? 1 : 0;
  std::vector<uint8_t> every(static_cast<size_t>(size));
  const std::vector<size_t> one(static_cast<size_t>(size), 1);
  HORA_RETURN_IF_ERROR(data.Allgatherv(&made, every.data(), one));
  std::string failed;
  for (int k = 0; k < size; ++k) {
    if (every[static_cast<size_t>(k)] == 0) {
      failed += (failed.empty() ? "" : ", ") + std::to_string(k);
    }
  }
  if (failed.empty()) {
    comm_ = std::move(*comm);
    return Status::Ok();
  }
  if (comm.ok()) (*comm)->Abort();
  return UnavailableError("the NCCL communicator could not be made on rank(s) " + failed +
                          (comm.ok() ? "" : " (this rank: " + comm.status().message() + ")"));
}

Status DeviceNccl::Usable() const {
  if (comm_) return Status::Ok();
  if (!broken_.ok()) return broken_;
  return AbortedError("the NCCL communicator is gone");
}

Status DeviceNccl::Allreduce(void* data, size_t count, const RequestMeta& m, int world) {
  HORA_RETURN_IF_ERROR(Usable());
  const Reduction& red = m.reduction;
  Status st = comm_->AllReduce(data, data, count, m.dtype, ReducingOp(red.op), stream_);
  if (!st.ok()) AbortIfBroken(st);
  if (st.ok() && count > 0 &&
      kernels::NeedsFinalize(m.dtype, red.op, world, red.postscale_factor)) {
    st = device_->Finalize(m.dtype, red.op, world, red.postscale_factor, data, count, stream_);
  }
  return st;
}

Status DeviceNccl::Broadcast(void* data, size_t bytes, int root) {
  HORA_RETURN_IF_ERROR(Usable());
  const Status st = comm_->Broadcast(data, bytes, root, stream_);
  if (!st.ok()) AbortIfBroken(st);
  return st;
}

}  // namespace hora

namespace hora {
namespace {

bool AllSame(const std::vector<size_t>& v) {
  return std::all_of(v.begin(), v.end(), [&](size_t x) { return x == v.front(); });
}

}  // namespace

Status DeviceNccl::Grouped(const std::function<Status(NcclComm&)>& calls) {
  HORA_RETURN_IF_ERROR(Usable());
  Status st = comm_->GroupStart();
  if (st.ok()) {
    st = calls(*comm_);
    const Status ended = comm_->GroupEnd();
    if (st.ok()) st = ended;
  }
  if (!st.ok()) AbortIfBroken(st);
  return st;
}

Status DeviceNccl::Allgather(const void* in, void* out, const ShapedPlan& plan, int rank) {
  HORA_RETURN_IF_ERROR(Usable());
  const std::vector<size_t>& bytes = plan.recv;
  const size_t mine = bytes[static_cast<size_t>(rank)];
  if (AllSame(bytes)) {
    if (mine == 0) return Status::Ok();
    const Status st = comm_->AllGather(in, out, mine, stream_);
    if (!st.ok()) AbortIfBroken(st);
    return st;
  }
  std::byte* to = static_cast<std::byte*>(out);
  size_t own = 0;
  for (int q = 0; q < rank; ++q) own += bytes[static_cast<size_t>(q)];
  Status st;
  if (mine > 0) st = device_->Copy(to + own, in, mine, gpu::CopyKind::kDeviceToDevice, stream_);
  // (Called whatever happened before: the other ranks are in it.)
  const Status moved = Grouped([&](NcclComm& c) {
    size_t offset = 0;
    for (size_t q = 0; q < bytes.size(); ++q) {
      if (static_cast<int>(q) != rank) {
        if (mine > 0) HORA_RETURN_IF_ERROR(c.Send(in, mine, static_cast<int>(q), stream_));
        if (bytes[q] > 0) {
          HORA_RETURN_IF_ERROR(c.Recv(to + offset, bytes[q], static_cast<int>(q), stream_));
        }
      }
      offset += bytes[q];
    }
    return Status::Ok();
  });
  return st.ok() ? moved : st;
}

Status DeviceNccl::Alltoall(const void* in, void* out, const ShapedPlan& plan, int rank) {
  HORA_RETURN_IF_ERROR(Usable());
  const std::byte* from = static_cast<const std::byte*>(in);
  std::byte* to = static_cast<std::byte*>(out);
  const size_t me = static_cast<size_t>(rank);
  size_t send_own = 0, recv_own = 0;
  for (size_t q = 0; q < me; ++q) {
    send_own += plan.send[q];
    recv_own += plan.recv[q];
  }
  Status st;
  if (plan.send[me] > 0) {
    st = device_->Copy(to + recv_own, from + send_own, plan.send[me],
                       gpu::CopyKind::kDeviceToDevice, stream_);
  }
  const Status moved = Grouped([&](NcclComm& c) {
    size_t sent = 0, received = 0;
    for (size_t q = 0; q < plan.send.size(); ++q) {
      if (q != me) {
        const int peer = static_cast<int>(q);
        if (plan.send[q] > 0)
          HORA_RETURN_IF_ERROR(c.Send(from + sent, plan.send[q], peer, stream_));
        if (plan.recv[q] > 0) {
          HORA_RETURN_IF_ERROR(c.Recv(to + received, plan.recv[q], peer, stream_));
        }
      }
      sent += plan.send[q];
      received += plan.recv[q];
    }
    return Status::Ok();
  });
  return st.ok() ? moved : st;
}

Status DeviceNccl::Reducescatter(const void* in, void* out, const ShapedPlan& plan,
                                 const RequestMeta& m, int rank, int world) {
  HORA_RETURN_IF_ERROR(Usable());
  const Reduction& red = m.reduction;
  const ReduceOp op = ReducingOp(red.op);
  const size_t esize = DataTypeSize(m.dtype);
  const size_t mine = plan.counts[static_cast<size_t>(rank)];
  Status st;
  if (AllSame(plan.counts)) {
    if (mine > 0) {
      st = comm_->ReduceScatter(in, out, mine, m.dtype, op, stream_);
      if (!st.ok()) AbortIfBroken(st);
    }
  } else {
    // One reduce per rank's part, to that rank.
    const std::byte* from = static_cast<const std::byte*>(in);
    st = Grouped([&](NcclComm& c) {
      size_t offset = 0;
      for (size_t q = 0; q < plan.counts.size(); ++q) {
        const int root = static_cast<int>(q);
        if (plan.counts[q] > 0) {
          HORA_RETURN_IF_ERROR(c.Reduce(from + offset * esize, root == rank ? out : nullptr,
                                        plan.counts[q], m.dtype, op, root, stream_));
        }
        offset += plan.counts[q];
      }
      return Status::Ok();
    });
  }
  if (st.ok() && mine > 0 && kernels::NeedsFinalize(m.dtype, red.op, world, red.postscale_factor)) {
    st = device_->Finalize(m.dtype, red.op, world, red.postscale_factor, out, mine, stream_);
  }
  return st;
}

}  // namespace hora
