// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// ServedHub and JoinServed (host_nccl_remote.h): a rank's calls to the hub
// of another process, each a connection.
#include "doubles/host_nccl_remote.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "doubles/host_nccl_wire.h"

namespace hora::host_nccl {
namespace {

// A rank's Meeting with a Hub of another process: each call a connection.
class ServedHub final : public Meeting {
 public:
  ServedHub(std::string name, uint64_t key, int rank, Duration timeout)
      : name_(std::move(name)), key_(key), rank_(rank), timeout_(timeout) {}
  // Leaves (the server then lets go of the hub for this rank).
  ~ServedHub() override {
    if (!joined_) return;
    Request q;
    q.op = static_cast<uint32_t>(Op::kLeave);
    q.rank = rank_;
    (void)Call(q, {}, Clock::now() + kBriefCall, nullptr);
  }

  Status Join(int size) {
    Request q;
    q.op = static_cast<uint32_t>(Op::kJoin);
    q.rank = rank_;
    q.size = size;
    HORA_RETURN_IF_ERROR(Call(q, {}, DeadlineAfter(Clock::now(), timeout_), nullptr));
    joined_ = true;
    return Status::Ok();
  }

  Status Meet(uint64_t seq, int rank, std::vector<std::byte> mine, TimePoint deadline,
              const std::function<void(const Parts&)>& fn) override {
    Request q;
    q.op = static_cast<uint32_t>(Op::kMeet);
    q.rank = rank;
    q.seq = seq;
    Parts all;
    HORA_RETURN_IF_ERROR(Wait(q, mine, deadline, &all));
    fn(all);
    return Status::Ok();
  }
  Status Post(int from, int to, std::vector<std::byte> bytes) override {
    Request q;
    q.op = static_cast<uint32_t>(Op::kPost);
    q.rank = from;
    q.other = to;
    return Call(q, bytes, DeadlineAfter(Clock::now(), timeout_), nullptr);
  }
  Result<std::vector<std::byte>> Take(int from, int to, TimePoint deadline) override {
    Request q;
    q.op = static_cast<uint32_t>(Op::kTake);
    q.rank = to;
    q.other = from;
    Parts got;
    HORA_RETURN_IF_ERROR(Wait(q, {}, deadline, &got));
    if (got.size() != 1) return InternalError("host NCCL: a receive's reply without its bytes");
    return std::move(got.front());
  }
  void Abort(const std::string& why) override {
    Request q;
    q.op = static_cast<uint32_t>(Op::kAbort);
    (void)Call(q, Bytes(why), Clock::now() + kBriefCall, nullptr);
  }
  void End(int rank, const Status& why) override HORA_EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      own_.emplace(rank, why);
      ended_.notify_all();
    }
    Request q;
    q.op = static_cast<uint32_t>(Op::kEnd);
    q.rank = rank;
    q.code = static_cast<int32_t>(why.code());
    (void)Call(q, Bytes(why.message()), Clock::now() + kBriefCall, nullptr);
  }
  Status ended(int rank) override HORA_EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      const auto it = own_.find(rank);
      if (it != own_.end()) return it->second;
    }
    Request q;
    q.op = static_cast<uint32_t>(Op::kEnded);
    q.rank = rank;
    return Call(q, {}, DeadlineAfter(Clock::now(), timeout_), nullptr);
  }

 private:
  // A call that waits in the meeting for the others, until `deadline`, as
  // rank `q.rank`.
  Status Wait(Request q, const std::vector<std::byte>& payload, TimePoint deadline, Parts* parts)
      HORA_EXCLUDES(mu_) {
    q.wait_ms = WaitOf(deadline);
    bool replied = false;
    const Status st = Call(q, payload, DeadlineAfter(deadline, kReplyMargin), parts, &replied);
    return replied ? st : Stuck(q.rank, deadline, st);
  }

  // A wait in the meeting whose server cannot be reached (its process
  // ended, with its connection: `failed`): it goes on, as NCCL's kernels
  // wait for a peer whose process ended, until this rank's own End (its
  // communicator aborted) or `deadline`.
  Status Stuck(int rank, TimePoint deadline, const Status& failed) HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    while (!own_.contains(rank)) {
      if (ended_.wait_until(lock.native(), deadline) == std::cv_status::timeout &&
          !own_.contains(rank)) {
        return TimeoutError("host NCCL: rank " + std::to_string(rank) +
                            " waited to its deadline: " + failed.message());
      }
    }
    return own_.at(rank);
  }

  // Sends `q` with `payload`, and waits for the reply (its parts to
  // `parts`) until `by` (the call's own deadline and a margin: the server
  // answers by then). `replied`: whether the server answered.
  Status Call(Request q, const std::vector<std::byte>& payload, TimePoint by, Parts* parts,
              bool* replied = nullptr) const {
    q.key = key_;
    q.bytes = payload.size();
    Result<net::Fd> fd = Connect(by);
    HORA_RETURN_IF_ERROR(fd.status());
    Status st = net::SendAll(fd->get(), &q, sizeof q, by);
    if (st.ok()) st = net::SendAll(fd->get(), payload.data(), payload.size(), by);
    Reply r;
    if (st.ok()) st = net::RecvAll(fd->get(), &r, sizeof r, by);
    std::string message(st.ok() ? r.message : 0, '\0');
    if (st.ok()) st = net::RecvAll(fd->get(), message.data(), message.size(), by);
    for (uint64_t k = 0; st.ok() && k < r.parts && parts != nullptr; ++k) {
      uint64_t n = 0;
      st = net::RecvAll(fd->get(), &n, sizeof n, by);
      if (st.ok() && n > kMostBytes)
        st = InternalError("a reply of " + std::to_string(n) + " bytes");
      if (!st.ok()) break;
      parts->emplace_back(n);
      st = net::RecvAll(fd->get(), parts->back().data(), n, by);
    }
    if (!st.ok()) {
      return UnavailableError(
          "host NCCL: the call to the process that serves the communicator's meeting (it made "
          "the id) failed: " +
          st.ToString());
    }
    if (replied != nullptr) *replied = true;
    return Status(static_cast<StatusCode>(r.code), std::move(message));
  }

  // A connection to the server, by `by` (nonblocking: a full backlog is
  // tried again, not waited on without a bound).
  Result<net::Fd> Connect(TimePoint by) const {
    net::Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (fd.get() < 0) return UnavailableError(Gone("socket", errno));
    socklen_t len = 0;
    const sockaddr_un a = Address(name_, &len);
    while (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), len) != 0) {
      if (errno != EAGAIN && errno != EINTR) return UnavailableError(Gone("connect", errno));
      if (Clock::now() >= by) return UnavailableError(Gone("connect", ETIMEDOUT));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return fd;
  }

  std::string Gone(const char* what, int err) const {
    return "host NCCL: the process that served the communicator's meeting (it made the id) "
           "cannot be reached (" +
           std::string(what) + ": " + std::strerror(err) + ")";
  }

  const std::string name_;
  const uint64_t key_;
  const int rank_;
  const Duration timeout_;
  bool joined_ = false;
  Mutex mu_;
  std::map<int, Status> own_ HORA_GUARDED_BY(mu_);  // End's, for ended
  std::condition_variable ended_;                   // (own_ grew)
};

}  // namespace

Result<std::shared_ptr<Meeting>> JoinServed(const std::string& name, uint64_t key, int size,
                                            int rank, Duration timeout) {
  auto hub = std::make_shared<ServedHub>(name, key, rank, timeout);
  HORA_RETURN_IF_ERROR(hub->Join(size));
  return std::shared_ptr<Meeting>(std::move(hub));
}

}  // namespace hora::host_nccl
