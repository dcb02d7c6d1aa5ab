// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "doubles/host_nccl.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "doubles/host_device.h"
#include "doubles/host_nccl_hub.h"
#include "doubles/host_nccl_remote.h"
#include "gpu/blocking_copy.h"
#include "kernels/reduce.h"

namespace hora {
namespace {

using host_nccl::Hub;
using host_nccl::Meeting;

constexpr char kMagic[8] = {'H', 'O', 'R', 'A', 'N', 'C', 'C', 'L'};

struct IdWire {
  char magic[8];
  uint64_t pid;
  uint64_t hub;     // the Hub's address
  uint64_t key;     // its key on the server (0: none)
  char server[64];  // the server's name (or why there is none)
};
static_assert(sizeof(IdWire) <= sizeof(NcclId::bytes));

// One call of a communicator, as queued (alone, or with the rest of its
// group).
struct Call {
  enum Kind { kAllReduce, kBroadcast, kAllGather, kReduceScatter, kReduce, kSend, kRecv };
  Kind kind;
  const void* in = nullptr;
  void* out = nullptr;
  size_t count = 0;  // elements (the reductions), else bytes
  DataType dtype = DataType::kUInt8;
  ReduceOp op = ReduceOp::kSum;
  int peer = 0;  // the root, or the other rank
  gpu::Stream stream;
};

// What the spec asks of a library's communicators: the call they refuse
// (0: none; counted over all of them: `calls` so far), and whether their
// calls are queued on the stream.
struct Refusal {
  uint64_t nth = 0;
  std::atomic<uint64_t> calls{0};
  bool queued = false;
  bool net = false;  // another rank's end is reported by AsyncError
};

// How this rank's calls ended (set where a queued one failed, or at its
// abort): AsyncError's answer, kept here so that asking costs no call to
// the meeting's server.
class OwnEnd {
 public:
  void Set(const Status& why) HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (why_.ok()) why_ = why;
  }
  Status Get() HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return why_;
  }

 private:
  Mutex mu_;
  Status why_ HORA_GUARDED_BY(mu_);
};

// What a call needs once queued, where the communicator may be gone.
struct Ranks {
  std::shared_ptr<Meeting> hub;
  std::shared_ptr<OwnEnd> own;
  int rank = 0;
  int size = 0;
  gpu::Device* device = nullptr;
  Duration timeout{};
  // Queued: the host device, whose memory a call on its stream reads and
  // writes directly, as a kernel (null: through copies, waited for).
  const gpu::HostDevice* on_stream = nullptr;

  Status Read(void* to, const void* from, size_t bytes) const {
    if (on_stream == nullptr) return gpu::CopyDeviceToHost(*device, to, from, bytes, timeout);
    HORA_ASSIGN_OR_RETURN(const std::byte* b, on_stream->Backing(from, bytes));
    std::memcpy(to, b, bytes);
    return Status::Ok();
  }
  Status Write(void* to, const void* from, size_t bytes) const {
    if (on_stream == nullptr) return gpu::CopyHostToDevice(*device, to, from, bytes, timeout);
    HORA_ASSIGN_OR_RETURN(std::byte * b, on_stream->Backing(to, bytes));
    std::memcpy(b, from, bytes);
    return Status::Ok();
  }
};

class HostComm final : public NcclComm {
 public:
  HostComm(std::shared_ptr<Meeting> hub, int rank, int size, gpu::Device& device, Duration timeout,
           std::shared_ptr<Refusal> refusal)
      : hub_(std::move(hub)),
        rank_(rank),
        size_(size),
        device_(device),
        timeout_(timeout),
        refusal_(std::move(refusal)) {}
  ~HostComm() override {
    if (event_.id != 0) (void)device_.DestroyEvent(event_);
  }

  Status AllReduce(const void* in, void* out, size_t count, DataType dtype, ReduceOp op,
                   gpu::Stream s) override {
    HORA_RETURN_IF_ERROR(Takes("allreduce", dtype, op));
    return Submit({Call::kAllReduce, in, out, count, dtype, op, 0, s});
  }
  Status Broadcast(void* data, size_t bytes, int root, gpu::Stream s) override {
    HORA_RETURN_IF_ERROR(Rank("broadcast", root));
    return Submit({Call::kBroadcast, data, data, bytes, DataType::kUInt8, ReduceOp::kSum, root, s});
  }
  Status AllGather(const void* in, void* out, size_t bytes, gpu::Stream s) override {
    return Submit({Call::kAllGather, in, out, bytes, DataType::kUInt8, ReduceOp::kSum, 0, s});
  }
  Status ReduceScatter(const void* in, void* out, size_t count, DataType dtype, ReduceOp op,
                       gpu::Stream s) override {
    HORA_RETURN_IF_ERROR(Takes("reducescatter", dtype, op));
    return Submit({Call::kReduceScatter, in, out, count, dtype, op, 0, s});
  }
  Status Reduce(const void* in, void* out, size_t count, DataType dtype, ReduceOp op, int root,
                gpu::Stream s) override {
    HORA_RETURN_IF_ERROR(Takes("reduce", dtype, op));
    HORA_RETURN_IF_ERROR(Rank("reduce", root));
    return Submit({Call::kReduce, in, out, count, dtype, op, root, s});
  }
  Status Send(const void* in, size_t bytes, int peer, gpu::Stream s) override {
    HORA_RETURN_IF_ERROR(Rank("send", peer));
    return Submit({Call::kSend, in, nullptr, bytes, DataType::kUInt8, ReduceOp::kSum, peer, s});
  }
  Status Recv(void* out, size_t bytes, int peer, gpu::Stream s) override {
    HORA_RETURN_IF_ERROR(Rank("recv", peer));
    return Submit({Call::kRecv, nullptr, out, bytes, DataType::kUInt8, ReduceOp::kSum, peer, s});
  }
  Status GroupStart() override {
    ++depth_;
    return Status::Ok();
  }
  Status GroupEnd() override {
    if (depth_ == 0) return InvalidArgument("host NCCL: a group ended that never started");
    if (--depth_ > 0) return Status::Ok();
    std::vector<Call> calls = std::move(group_);
    group_.clear();
    return Run(calls);
  }

  Status AsyncError() override {
    Status own = own_->Get();
    // (Not queued, a timeout or an abort ends every rank's calls: the
    // meeting's.)
    if (own.ok() && !refusal_->queued) own = hub_->ended(rank_);
    if (!own.ok() || !refusal_->net) return own;
    // (":net": as NCCL across hosts, whose proxy sees a peer's connection
    // close when that peer aborts, and reports ncclRemoteError.)
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      if (const Status theirs = hub_->ended(q); !theirs.ok()) {
        return UnavailableError("host NCCL: a remote error (ncclRemoteError): rank " +
                                std::to_string(q) + "'s calls ended: " + theirs.message());
      }
    }
    return Status::Ok();
  }
  void Abort() override {
    const std::string who = "rank " + std::to_string(rank_);
    // (Queued: NCCL's abort ends this rank's kernels; the others' wait on.)
    own_->Set(AbortedError("host NCCL: " + who + " aborted its communicator"));
    if (refusal_->queued) {
      hub_->End(rank_, own_->Get());
    } else {
      hub_->Abort(who + " aborted it");
    }
  }

 private:
  static Status Takes(const char* what, DataType dtype, ReduceOp op) {
    if (NcclTakes(dtype, op)) return Status::Ok();
    return InvalidArgument(std::string("host NCCL: ") + what + " of " + DataTypeName(dtype) +
                           " with " + ReduceOpName(op) + ", which NCCL does not take");
  }
  Status Rank(const char* what, int r) const {
    if (r >= 0 && r < size_) return Status::Ok();
    return InvalidArgument(std::string("host NCCL: ") + what + " names rank " + std::to_string(r) +
                           " of " + std::to_string(size_));
  }
  Status Submit(const Call& c) {
    const uint64_t n = ++refusal_->calls;
    if (n == refusal_->nth) {
      return UnavailableError("host NCCL: rank " + std::to_string(rank_) + " refused its call " +
                              std::to_string(n) +
                              " (HORA_NCCL_LIBRARY=host:refuse-call=" + std::to_string(n) + ")");
    }
    if (depth_ > 0) {
      group_.push_back(c);
      return Status::Ok();
    }
    return Run({c});
  }

  // Runs `calls` (one, or a group's) after the work queued before them on
  // their stream: waited for on the host, or (queued) queued after it on
  // the first call's stream, waiting there for the other ranks as NCCL's
  // kernels do, at most ten times the timeout (a backstop for tests that
  // go wrong), and saying how they ended through AsyncError.
  Status Run(std::vector<Call> calls) {
    if (calls.empty()) return Status::Ok();
    const uint64_t first = seq_;
    for (const Call& c : calls) {
      if (c.kind != Call::kSend && c.kind != Call::kRecv) ++seq_;
    }
    Ranks at{hub_, own_, rank_, size_, &device_, timeout_};
    if (!refusal_->queued) {
      for (const Call& c : calls) {
        if (Status st = Drain(c.stream); !st.ok()) return st.WithContext("host NCCL");
      }
      return RunCalls(at, first, calls);
    }
    auto* host = dynamic_cast<gpu::HostDevice*>(&device_);
    if (host == nullptr) {
      return InvalidArgument("host NCCL: queued calls need the host device (HORA_DEVICE=host)");
    }
    const gpu::Stream stream = calls.front().stream;
    for (const Call& c : calls) {
      if (c.stream.id != stream.id) {
        return InvalidArgument("host NCCL: a queued group's calls are on several streams");
      }
    }
    at.timeout *= 10;
    at.on_stream = host;
    return host->RunOnStream(stream, [at, first, calls = std::move(calls)] {
      const Status st = RunCalls(at, first, calls);
      if (st.ok()) return;
      at.own->Set(st);
      at.hub->End(at.rank, st);
    });
  }

  static size_t InBytes(const Call& c, int size) {
    switch (c.kind) {
      case Call::kAllReduce:
      case Call::kReduce:
        return c.count * DataTypeSize(c.dtype);
      case Call::kReduceScatter:
        return c.count * DataTypeSize(c.dtype) * static_cast<size_t>(size);
      case Call::kRecv:
        return 0;
      default:
        return c.count;
    }
  }

  // Runs `calls` as NCCL would a group, as rank `at.rank`, its collectives
  // from call `seq` on: sends first, then the collectives in order, then
  // the receives, so that
  // no order of them across ranks waits for good. A rank whose device
  // failed before them (its queued work, or the read of its inputs) fails
  // its calls without meeting the others, as NCCL's kernels do not run on
  // a GPU that faulted: the others wait for it until it aborts (or their
  // timeout), and never fold data it did not give.
  static Status RunCalls(const Ranks& at, uint64_t seq, const std::vector<Call>& calls) {
    std::vector<std::vector<std::byte>> in(calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      const Call& c = calls[i];
      const bool reads = c.kind != Call::kRecv && (c.kind != Call::kBroadcast || at.rank == c.peer);
      in[i].resize(reads ? InBytes(c, at.size) : 0);
      if (!in[i].empty()) {
        const Status got = at.Read(in[i].data(), c.in, in[i].size());
        if (!got.ok()) return got.WithContext("host NCCL");
      }
    }
    std::vector<std::vector<std::byte>> out(calls.size());
    std::vector<bool> writes(calls.size(), false);
    for (size_t i = 0; i < calls.size(); ++i) {
      if (calls[i].kind == Call::kSend) {
        HORA_RETURN_IF_ERROR(at.hub->Post(at.rank, calls[i].peer, std::move(in[i])));
      }
    }
    for (size_t i = 0; i < calls.size(); ++i) {
      const Call& c = calls[i];
      if (c.kind == Call::kSend || c.kind == Call::kRecv) continue;
      writes[i] = c.kind != Call::kBroadcast || at.rank != c.peer;
      if (c.kind == Call::kReduce) writes[i] = at.rank == c.peer;
      HORA_RETURN_IF_ERROR(at.hub->Meet(seq++, at.rank, std::move(in[i]),
                                        DeadlineAfter(Clock::now(), at.timeout),
                                        [&](const auto& all) { out[i] = Fold(c, at.rank, all); }));
    }
    for (size_t i = 0; i < calls.size(); ++i) {
      const Call& c = calls[i];
      if (c.kind != Call::kRecv) continue;
      HORA_ASSIGN_OR_RETURN(out[i],
                            at.hub->Take(c.peer, at.rank, DeadlineAfter(Clock::now(), at.timeout)));
      if (out[i].size() != c.count) {
        return InvalidArgument("host NCCL: rank " + std::to_string(c.peer) + " sent " +
                               std::to_string(out[i].size()) + " bytes; rank " +
                               std::to_string(at.rank) + " received " + std::to_string(c.count));
      }
      writes[i] = true;
    }
    for (size_t i = 0; i < calls.size(); ++i) {
      if (writes[i] && !out[i].empty()) {
        const Status st = at.Write(calls[i].out, out[i].data(), out[i].size());
        if (!st.ok()) return st.WithContext("host NCCL");
      }
    }
    return Status::Ok();
  }

  // Call `c`'s result on this rank, from every rank's input.
  static std::vector<std::byte> Fold(const Call& c, int rank,
                                     const std::vector<std::vector<std::byte>>& all) {
    switch (c.kind) {
      case Call::kBroadcast:
        return all[static_cast<size_t>(c.peer)];
      case Call::kAllGather: {
        std::vector<std::byte> r;
        for (const auto& v : all) r.insert(r.end(), v.begin(), v.end());
        return r;
      }
      default: {  // the reductions, folded in rank order
        std::vector<std::byte> r = all[0];
        const size_t n = r.size() / DataTypeSize(c.dtype);
        for (size_t k = 1; k < all.size(); ++k) {
          if (n > 0) kernels::Reduce(c.dtype, c.op, r.data(), all[k].data(), n);
        }
        if (c.kind != Call::kReduceScatter) return r;
        const size_t part = c.count * DataTypeSize(c.dtype);
        const auto from = r.begin() + static_cast<std::ptrdiff_t>(part * static_cast<size_t>(rank));
        return std::vector<std::byte>(from, from + static_cast<std::ptrdiff_t>(part));
      }
    }
  }

  // Waits on the host for what was queued on `s` (NCCL would queue after it).
  Status Drain(gpu::Stream s) {
    if (event_.id == 0) {
      HORA_ASSIGN_OR_RETURN(event_, device_.CreateEvent());
    }
    HORA_RETURN_IF_ERROR(device_.Record(event_, s));
    return device_.Wait(event_, DeadlineAfter(Clock::now(), timeout_));
  }

  std::shared_ptr<Meeting> hub_;
  const int rank_;
  const int size_;
  gpu::Device& device_;
  const Duration timeout_;
  const std::shared_ptr<Refusal> refusal_;
  const std::shared_ptr<OwnEnd> own_ = std::make_shared<OwnEnd>();
  uint64_t seq_ = 0;
  gpu::Event event_;
  int depth_ = 0;            // GroupStart's not yet ended
  std::vector<Call> group_;  // the calls of the open group
};

class HostNccl final : public NcclLibrary {
 public:
  HostNccl(uint64_t refuse_call, bool queued, bool net) : refusal_(std::make_shared<Refusal>()) {
    refusal_->nth = refuse_call;
    refusal_->queued = queued;
    refusal_->net = net;
  }
  std::string version() const override { return "host NCCL (tests)"; }

  Result<NcclId> UniqueId() override HORA_EXCLUDES(mu_) {
    auto hub = std::make_shared<Hub>();
    hub->Keep(hub);  // (until every rank joined)
    IdWire w{};
    std::memcpy(w.magic, kMagic, sizeof kMagic);
    w.pid = static_cast<uint64_t>(getpid());
    w.hub = reinterpret_cast<uintptr_t>(hub.get());
    {
      // Served to ranks of other processes too (host_nccl_remote.h); where
      // that cannot be, only to this process's.
      MutexLock lock(mu_);
      if (server_ == nullptr && served_.ok()) {
        Result<std::unique_ptr<host_nccl::HubServer>> started = host_nccl::HubServer::Start();
        if (started.ok()) {
          server_ = std::move(*started);
        } else {
          served_ = started.status();
        }
      }
      if (server_ != nullptr) {
        w.key = server_->Add(hub);
        std::strncpy(w.server, server_->name().c_str(), sizeof w.server - 1);
      } else {  // (why not, for the ranks of other processes to say)
        std::strncpy(w.server, served_.ToString().c_str(), sizeof w.server - 1);
      }
    }
    NcclId id;
    std::memcpy(id.bytes.data(), &w, sizeof w);
    return id;
  }

  Result<std::unique_ptr<NcclComm>> InitRank(const NcclId& id, int size, int rank,
                                             gpu::Device& device, Duration timeout) override {
    IdWire w;
    std::memcpy(&w, id.bytes.data(), sizeof w);
    if (std::memcmp(w.magic, kMagic, sizeof kMagic) != 0) {
      return InvalidArgument("host NCCL: an id that another library made");
    }
    std::shared_ptr<Meeting> met;
    if (w.pid == static_cast<uint64_t>(getpid())) {
      std::shared_ptr<Hub> held;
      HORA_RETURN_IF_ERROR(
          reinterpret_cast<Hub*>(static_cast<uintptr_t>(w.hub))->Join(size, &held));
      met = std::move(held);
    } else {
      w.server[sizeof w.server - 1] = '\0';
      if (w.key == 0) {
        return InvalidArgument("host NCCL: an id of process " + std::to_string(w.pid) +
                               ", which serves it to no other process (" + w.server + ")");
      }
      HORA_ASSIGN_OR_RETURN(met, host_nccl::JoinServed(w.server, w.key, size, rank, timeout));
    }
    return std::unique_ptr<NcclComm>(
        new HostComm(std::move(met), rank, size, device, timeout, refusal_));
  }

 private:
  const std::shared_ptr<Refusal> refusal_;
  Mutex mu_;
  std::unique_ptr<host_nccl::HubServer> server_ HORA_GUARDED_BY(mu_);
  Status served_ HORA_GUARDED_BY(mu_);  // why there is no server
};

}  // namespace

Result<std::unique_ptr<NcclLibrary>> CreateHostNccl(std::string_view spec) {
  uint64_t refuse = 0;
  bool queued = false;
  bool net = false;
  const std::string_view given = spec;
  constexpr std::string_view kRefuse = ":refuse-call=", kQueued = ":queued", kNet = ":net";
  while (!spec.empty()) {
    if (spec.starts_with(kQueued) && !queued) {
      queued = true;
      spec.remove_prefix(kQueued.size());
      continue;
    }
    if (spec.starts_with(kNet) && !net) {
      net = true;
      spec.remove_prefix(kNet.size());
      continue;
    }
    if (!spec.starts_with(kRefuse) || refuse > 0) break;
    const std::string_view rest = spec.substr(kRefuse.size());
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), refuse);
    if (ec != std::errc() || refuse == 0) break;
    spec = rest.substr(static_cast<size_t>(end - rest.data()));
  }
  if (!spec.empty()) {
    return InvalidArgument("HORA_NCCL_LIBRARY=host" + std::string(given) +
                           ": after \"host\", only \":queued\", \":net\" and \":refuse-call=N\" "
                           "(N > 0) are taken");
  }
  return std::unique_ptr<NcclLibrary>(std::make_unique<HostNccl>(refuse, queued, net));
}

}  // namespace hora
