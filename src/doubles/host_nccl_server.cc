// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// HubServer (host_nccl_remote.h): the hubs of this process, served to the
// ranks of other processes, one thread per call.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <list>
#include <map>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "doubles/host_nccl_remote.h"
#include "doubles/host_nccl_wire.h"

namespace hora::host_nccl {

class HubServer::Impl {
 public:
  Impl(net::Fd listening, std::string name) : listening_(std::move(listening)), name_(name) {
    accept_ = std::thread([this] { Accept(); });
  }
  ~Impl() {
    stop_ = true;
    accept_.join();
    listening_.Reset();  // (no connection waits in its backlog)
    {
      MutexLock lock(mu_);
      for (auto& [key, served] : hubs_) {
        for (auto& [r, hub] : served.remote) {
          hub->End(r, UnavailableError("host NCCL: the communicator's meeting was closed: the "
                                       "process that made its id closed its NCCL library (its "
                                       "session or its process ended)"));
        }
      }
    }
    std::list<Worker> workers;
    {
      MutexLock lock(mu_);
      workers.swap(workers_);
    }
    for (Worker& w : workers) w.thread.join();
  }

  uint64_t Add(const std::shared_ptr<Hub>& hub) HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    std::erase_if(hubs_, [](const auto& kv) { return kv.second.hub.expired(); });
    hubs_[next_key_].hub = hub;
    return next_key_++;
  }
  const std::string& name() const { return name_; }

 private:
  struct Served {
    std::weak_ptr<Hub> hub;
    // Its ranks of other processes, each holding it until it leaves.
    std::map<int, std::shared_ptr<Hub>> remote;
  };
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  void Accept() HORA_EXCLUDES(mu_) {
    while (!stop_) {
      pollfd p{listening_.get(), POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const int fd = ::accept4(listening_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        // (Out of descriptors, say: the socket stays ready; no spinning.)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      auto done = std::make_shared<std::atomic<bool>>(false);
      MutexLock lock(mu_);
      for (auto it = workers_.begin(); it != workers_.end();) {
        if (*it->done) {
          it->thread.join();
          it = workers_.erase(it);
        } else {
          ++it;
        }
      }
      workers_.push_back({std::thread([this, fd, done] {
                            net::Fd owned(fd);
                            Serve(owned.get());
                            *done = true;
                          }),
                          done});
    }
  }

  // Only this user's processes are served.
  static bool SameUser(int fd) {
    ucred who{};
    socklen_t len = sizeof who;
    return ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &who, &len) == 0 && who.uid == ::geteuid();
  }

  // Whether `q`'s ranks are ranks of `hub` (of `q.size` for a join).
  static bool RanksOf(const Request& q, Hub& hub) {
    const int size = static_cast<Op>(q.op) == Op::kJoin ? q.size : hub.size();
    const bool two = static_cast<Op>(q.op) == Op::kPost || static_cast<Op>(q.op) == Op::kTake;
    return q.rank >= 0 && q.rank < size && (!two || (q.other >= 0 && q.other < size));
  }

  // The hub of key `q.key`, and what a join or a leave of `q.rank` does to
  // its holders; null where it is gone.
  std::shared_ptr<Hub> Find(const Request& q) HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    const auto it = hubs_.find(q.key);
    if (it == hubs_.end()) return nullptr;
    std::shared_ptr<Hub> hub = it->second.hub.lock();
    if (hub == nullptr) return nullptr;
    if (static_cast<Op>(q.op) == Op::kJoin) it->second.remote[q.rank] = hub;
    if (static_cast<Op>(q.op) == Op::kLeave) Forget(q);
    return hub;
  }
  // Lets go of hub `q.key` for rank `q.rank` (it left, or never joined).
  void Forget(const Request& q) HORA_REQUIRES(mu_) {
    const auto it = hubs_.find(q.key);
    if (it != hubs_.end()) it->second.remote.erase(q.rank);
  }

  // One call of a rank of another process, answered.
  void Serve(int fd) HORA_EXCLUDES(mu_) {
    if (!SameUser(fd)) return;
    Request q;
    const TimePoint by = Clock::now() + kReplyMargin;
    if (!net::RecvAll(fd, &q, sizeof q, by).ok()) return;
    if (q.bytes > kMostBytes) {
      (void)SendReply(fd,
                      InvalidArgument("host NCCL: a call of " + std::to_string(q.bytes) +
                                      " bytes, more than it takes"),
                      {});
      return;
    }
    std::vector<std::byte> payload(q.bytes);
    if (!net::RecvAll(fd, payload.data(), payload.size(), by).ok()) return;
    std::shared_ptr<Hub> hub = Find(q);
    if (hub == nullptr) {
      (void)SendReply(fd, InvalidArgument("host NCCL: no communicator of this id here"), {});
      return;
    }
    if (!RanksOf(q, *hub)) {
      (void)SendReply(
          fd,
          InvalidArgument("host NCCL: a call naming ranks outside the "
                          "communicator (rank " +
                          std::to_string(q.rank) + ", peer " + std::to_string(q.other) + ")"),
          {});
      return;
    }
    Parts parts;
    Status st;
    switch (static_cast<Op>(q.op)) {
      case Op::kJoin: {
        std::shared_ptr<Hub> held;  // (Find made this server its holder)
        st = hub->Join(q.size, &held);
        if (!st.ok()) {
          MutexLock lock(mu_);
          Forget(q);
        }
        break;
      }
      case Op::kMeet:
        st = hub->Meet(q.seq, q.rank, std::move(payload), DeadlineOf(q.wait_ms),
                       [&](const Parts& all) { parts = all; });
        break;
      case Op::kPost:
        st = hub->Post(q.rank, q.other, std::move(payload));
        break;
      case Op::kTake: {
        Result<std::vector<std::byte>> got = hub->Take(q.other, q.rank, DeadlineOf(q.wait_ms));
        st = got.status();
        if (got.ok()) parts.push_back(std::move(*got));
        break;
      }
      case Op::kAbort:
        hub->Abort(Text(payload));
        break;
      case Op::kEnd:
        hub->End(q.rank, Status(static_cast<StatusCode>(q.code), Text(payload)));
        break;
      case Op::kEnded:
        st = hub->ended(q.rank);
        break;
      case Op::kLeave:
        break;
      default:
        st = InvalidArgument("host NCCL: an unknown call " + std::to_string(q.op));
    }
    hub.reset();  // (before the answer: a rank that left holds it no more)
    (void)SendReply(fd, st, parts);
  }

  net::Fd listening_;
  const std::string name_;
  std::atomic<bool> stop_{false};
  std::thread accept_;
  Mutex mu_;
  std::map<uint64_t, Served> hubs_ HORA_GUARDED_BY(mu_);
  uint64_t next_key_ HORA_GUARDED_BY(mu_) = 1;
  std::list<Worker> workers_ HORA_GUARDED_BY(mu_);
};

Result<std::unique_ptr<HubServer>> HubServer::Start() {
  net::Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) {
    return UnavailableError(std::string("host NCCL: socket: ") + std::strerror(errno));
  }
  // (The name: this process, and a random number, so that a client of a
  // server gone never reaches another.)
  std::random_device random;
  char nonce[17];
  std::snprintf(nonce, sizeof nonce, "%08x%08x", random(), random());
  const std::string name = "hora-host-nccl-" + std::to_string(::getpid()) + "-" + nonce;
  socklen_t len = 0;
  const sockaddr_un a = Address(name, &len);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&a), len) != 0 ||
      ::listen(fd.get(), 128) != 0) {
    return UnavailableError("host NCCL: cannot listen at @" + name + ": " + std::strerror(errno));
  }
  return std::unique_ptr<HubServer>(new HubServer(std::make_unique<Impl>(std::move(fd), name)));
}

HubServer::HubServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HubServer::~HubServer() = default;
uint64_t HubServer::Add(const std::shared_ptr<Hub>& hub) { return impl_->Add(hub); }
const std::string& HubServer::name() const { return impl_->name(); }

}  // namespace hora::host_nccl
