// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "backends/nccl/host_nccl.h"

#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <vector>

#include "common/mutex.h"
#include "gpu/blocking_copy.h"
#include "kernels/reduce.h"

namespace hora {
namespace {

constexpr char kMagic[8] = {'H', 'O', 'R', 'A', 'N', 'C', 'C', 'L'};

struct IdWire {
  char magic[8];
  uint64_t pid;
  uint64_t hub;  // the Hub's address
};

// Where the ranks of one communicator meet. Alive until every rank that
// init from its id has let go (it holds itself until the last one came).
class Hub {
 public:
  // Joins as one of `size` ranks; the hub then lives while the caller holds it.
  Status Join(int size, std::shared_ptr<Hub>* held) HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (size_ == 0) size_ = size;
    if (size != size_) {
      return InvalidArgument("host NCCL: init as one of " + std::to_string(size) +
                             " ranks, but the first rank said " + std::to_string(size_));
    }
    *held = self_;
    if (++joined_ == size_) self_.reset();  // (every rank holds it now)
    return Status::Ok();
  }
  void Keep(std::shared_ptr<Hub> self) HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    self_ = std::move(self);
  }

  // Round `seq`: puts this rank's bytes there, waits (until `deadline`) for
  // every rank's, then fn(every rank's bytes).
  Status Meet(uint64_t seq, int rank, std::vector<std::byte> mine, TimePoint deadline,
              const std::function<void(const std::vector<std::vector<std::byte>>&)>& fn)
      HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    Round& round = rounds_[seq];
    round.data.resize(static_cast<size_t>(size_));
    round.data[static_cast<size_t>(rank)] = std::move(mine);
    ++round.arrived;
    cv_.notify_all();
    while (round.arrived < size_ && aborted_.ok()) {
      if (cv_.wait_until(lock.native(), deadline) == std::cv_status::timeout &&
          round.arrived < size_) {
        aborted_ = TimeoutError("host NCCL: timed out waiting for " +
                                std::to_string(size_ - round.arrived) + " rank(s) in call " +
                                std::to_string(seq));
        cv_.notify_all();
      }
    }
    if (!aborted_.ok()) return aborted_;
    fn(round.data);  // (no rank changes the round until every rank left it)
    if (++round.left == size_) rounds_.erase(seq);
    return Status::Ok();
  }

  void Abort(const std::string& why) HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (aborted_.ok()) aborted_ = AbortedError("host NCCL: the communicator was aborted: " + why);
    cv_.notify_all();
  }
  Status aborted() HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return aborted_;
  }

 private:
  struct Round {
    std::vector<std::vector<std::byte>> data;
    int arrived = 0;
    int left = 0;
  };
  Mutex mu_;
  std::condition_variable cv_;
  int size_ HORA_GUARDED_BY(mu_) = 0;
  int joined_ HORA_GUARDED_BY(mu_) = 0;
  std::shared_ptr<Hub> self_ HORA_GUARDED_BY(mu_);
  std::map<uint64_t, Round> rounds_ HORA_GUARDED_BY(mu_);
  Status aborted_ HORA_GUARDED_BY(mu_);
};

class HostComm final : public NcclComm {
 public:
  HostComm(std::shared_ptr<Hub> hub, int rank, gpu::Device& device, Duration timeout)
      : hub_(std::move(hub)), rank_(rank), device_(device), timeout_(timeout) {}
  ~HostComm() override {
    if (event_.id != 0) (void)device_.DestroyEvent(event_);
  }

  Status AllReduce(const void* in, void* out, size_t count, DataType dtype, ReduceOp op,
                   gpu::Stream s) override {
    if (!NcclTakes(dtype, op)) {
      return InvalidArgument(std::string("host NCCL: allreduce of ") + DataTypeName(dtype) +
                             " with " + ReduceOpName(op) + ", which NCCL does not take");
    }
    const size_t bytes = count * DataTypeSize(dtype);
    // A rank whose input cannot be read still meets the others, as NCCL's
    // call would still be queued: with zeros, and its error after.
    Result<std::vector<std::byte>> mine = Download(in, bytes, s);
    std::vector<std::byte> result(bytes);
    HORA_RETURN_IF_ERROR(
        Meet(mine.ok() ? std::move(*mine) : std::vector<std::byte>(bytes), [&](const auto& all) {
          if (bytes == 0) return;
          std::memcpy(result.data(), all[0].data(), bytes);
          for (size_t k = 1; k < all.size(); ++k) {
            kernels::Reduce(dtype, op, result.data(), all[k].data(), count);
          }
        }));
    HORA_RETURN_IF_ERROR(mine.status());
    return Upload(out, result, "allreduce");
  }

  Status Broadcast(void* data, size_t bytes, int root, gpu::Stream s) override {
    std::vector<std::byte> mine;
    Status got;
    if (rank_ == root) {
      Result<std::vector<std::byte>> read = Download(data, bytes, s);
      got = read.status();
      mine = read.ok() ? std::move(*read) : std::vector<std::byte>(bytes);
    } else {
      got = Drain(s);
    }
    std::vector<std::byte> result;
    HORA_RETURN_IF_ERROR(
        Meet(std::move(mine), [&](const auto& all) { result = all[static_cast<size_t>(root)]; }));
    HORA_RETURN_IF_ERROR(got);
    if (rank_ == root) return Status::Ok();
    return Upload(data, result, "broadcast");
  }

  Status AsyncError() override { return hub_->aborted(); }
  void Abort() override { hub_->Abort("rank " + std::to_string(rank_) + " aborted it"); }

 private:
  // Waits on the host for what was queued on `s` (NCCL would queue after it).
  Status Drain(gpu::Stream s) {
    if (event_.id == 0) {
      HORA_ASSIGN_OR_RETURN(event_, device_.CreateEvent());
    }
    HORA_RETURN_IF_ERROR(device_.Record(event_, s));
    return device_.Wait(event_, DeadlineAfter(Clock::now(), timeout_));
  }
  Result<std::vector<std::byte>> Download(const void* p, size_t bytes, gpu::Stream s) {
    HORA_RETURN_IF_ERROR(Drain(s));
    std::vector<std::byte> v(bytes);
    if (bytes > 0)
      HORA_RETURN_IF_ERROR(gpu::CopyDeviceToHost(device_, v.data(), p, bytes, timeout_));
    return v;
  }
  Status Upload(void* p, const std::vector<std::byte>& v, const char* what) {
    if (v.empty()) return Status::Ok();
    const Status st = gpu::CopyHostToDevice(device_, p, v.data(), v.size(), timeout_);
    return st.ok() ? st : st.WithContext(std::string("host NCCL: ") + what);
  }
  Status Meet(std::vector<std::byte> mine,
              const std::function<void(const std::vector<std::vector<std::byte>>&)>& fn) {
    return hub_->Meet(seq_++, rank_, std::move(mine), DeadlineAfter(Clock::now(), timeout_), fn);
  }

  std::shared_ptr<Hub> hub_;
  const int rank_;
  gpu::Device& device_;
  const Duration timeout_;
  uint64_t seq_ = 0;
  gpu::Event event_;
};

class HostNccl final : public NcclLibrary {
 public:
  std::string version() const override { return "host NCCL (tests)"; }

  Result<NcclId> UniqueId() override {
    auto hub = std::make_shared<Hub>();
    hub->Keep(hub);  // (until every rank joined)
    IdWire w{};
    std::memcpy(w.magic, kMagic, sizeof kMagic);
    w.pid = static_cast<uint64_t>(getpid());
    w.hub = reinterpret_cast<uintptr_t>(hub.get());
    NcclId id;
    std::memcpy(id.bytes.data(), &w, sizeof w);
    return id;
  }

  Result<std::unique_ptr<NcclComm>> InitRank(const NcclId& id, int size, int rank,
                                             gpu::Device& device, Duration timeout) override {
    IdWire w;
    std::memcpy(&w, id.bytes.data(), sizeof w);
    if (std::memcmp(w.magic, kMagic, sizeof kMagic) != 0 ||
        w.pid != static_cast<uint64_t>(getpid())) {
      return InvalidArgument(
          "host NCCL: an id from another process or library (host NCCL runs ranks that are "
          "threads of one process)");
    }
    std::shared_ptr<Hub> held;
    HORA_RETURN_IF_ERROR(reinterpret_cast<Hub*>(static_cast<uintptr_t>(w.hub))->Join(size, &held));
    return std::unique_ptr<NcclComm>(new HostComm(std::move(held), rank, device, timeout));
  }
};

}  // namespace

std::unique_ptr<NcclLibrary> CreateHostNccl() { return std::make_unique<HostNccl>(); }

}  // namespace hora
