// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "store/tcp_store_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include "common/log_limiter.h"
#include "common/thread_name.h"
#include "net/auth.h"
#include "net/socket.h"
#include "store/tcp_store.h"

namespace hora {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
// A connection whose unsent output exceeds this is not read from until the
// client catches up, so a client that never reads cannot grow server memory.
constexpr size_t kMaxPendingOutput = 4 * 1024 * 1024;
constexpr int kMaxAcceptsPerWake = 64;

struct Connection {
  uint64_t id = 0;
  net::Fd fd;
  std::string peer;
  std::optional<net::ServerHandshake> handshake;  // until authenticated
  TimePoint handshake_deadline;
  Bytes in;
  size_t in_off = 0;  // bytes of `in` already parsed
  Bytes out;
  size_t out_off = 0;  // bytes of `out` already sent
  bool parked = false;
  bool dead = false;

  size_t pending_out() const { return out.size() - out_off; }
  bool wants_read() const {
    if (handshake) return true;
    return !parked && pending_out() < kMaxPendingOutput;
  }
};

}  // namespace

class TcpStoreServer::Loop {
 public:
  Loop(net::Fd listener, net::Fd wake, std::string secret, std::optional<Logger> logger,
       TcpStoreServerOptions options, Counters* counters)
      : listener_(std::move(listener)),
        wake_(std::move(wake)),
        secret_(std::move(secret)),
        logger_(logger),
        options_(options),
        counters_(counters) {}

  void Run();
  void Stop() {
    stop_.store(true);
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_.get(), &one, sizeof one);
  }

 private:
  void Log(LogLevel level, const std::string& m) const {
    if (logger_) logger_->Log(level, "store server: " + m);
  }
  void AcceptAll(TimePoint now);
  void OnReadable(Connection& c, TimePoint now);
  void FinishHandshake(Connection& c);
  void ServeInput(Connection& c, TimePoint now);
  void Queue(Connection& c, const Bytes& message);
  void Flush(Connection& c);
  void Refuse(Connection& c);
  void Drop(Connection& c, const std::string& why, bool malformed);
  void ReleaseParked(TimePoint now);

  net::Fd listener_;
  net::Fd wake_;
  const std::string secret_;
  const std::optional<Logger> logger_;
  const TcpStoreServerOptions options_;
  Counters* counters_;
  std::atomic<bool> stop_{false};
  TimePoint listener_paused_until_{};
  uint64_t next_id_ = 1;
  std::map<uint64_t, Connection> conns_;
  StoreTable table_;
  std::vector<uint64_t> resume_;  // unparked connections that may have buffered requests
  LogLimiter refusals_;           // refused connections: a few logged per window, then a count
};

void TcpStoreServer::Loop::Run() {
  std::vector<pollfd> fds;
  std::vector<Connection*> owners;
  while (!stop_.load()) {
    TimePoint now = Clock::now();
    fds.assign({{wake_.get(), POLLIN, 0}, {listener_.get(), POLLIN, 0}});
    if (now < listener_paused_until_) fds[1].events = 0;
    owners.clear();
    TimePoint next =
        std::min(table_.NextDeadline(),
                 listener_paused_until_ > now ? listener_paused_until_ : TimePoint::max());
    if (refusals_.held() > 0) next = std::min(next, refusals_.window_end());
    for (auto& [id, c] : conns_) {
      short events = POLLRDHUP;
      if (c.wants_read()) events |= POLLIN;
      if (c.pending_out() > 0) events |= POLLOUT;
      if (c.handshake) next = std::min(next, c.handshake_deadline);
      fds.push_back({c.fd.get(), events, 0});
      owners.push_back(&c);
    }
    const int timeout = next == TimePoint::max() ? -1 : net::PollTimeoutMs(next);
    if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
      Log(LogLevel::kError, std::string("poll failed: ") + std::strerror(errno));
      break;
    }
    if (fds[0].revents != 0) {
      uint64_t drained = 0;
      [[maybe_unused]] ssize_t n = read(wake_.get(), &drained, sizeof drained);
    }
    now = Clock::now();
    if ((fds[1].revents & POLLIN) != 0) AcceptAll(now);
    for (size_t i = 0; i < owners.size(); ++i) {
      Connection& c = *owners[i];
      const short ev = fds[i + 2].revents;
      if (!c.dead && (ev & POLLIN) != 0) OnReadable(c, now);
      if (!c.dead && (ev & POLLOUT) != 0) Flush(c);
      if (!c.dead && (ev & (POLLERR | POLLHUP)) != 0) Drop(c, "connection error", false);
      if (!c.dead && (ev & POLLRDHUP) != 0 && (fds[i + 2].events & POLLIN) == 0) {
        Drop(c, "client closed the connection", false);
      }
    }
    for (auto& [id, c] : conns_) {
      if (!c.dead && c.handshake && c.handshake_deadline <= now) Refuse(c);
    }
    refusals_.Flush(now, [&](const std::string& m) { Log(LogLevel::kWarning, m); });
    ReleaseParked(now);
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (!it->second.dead) {
        ++it;
        continue;
      }
      table_.DropClient(it->first);
      it = conns_.erase(it);
    }
  }
  // Shutdown: say what refusals were held back, answer parked requests
  // (best effort), then close everything.
  refusals_.Flush(
      Clock::now(), [&](const std::string& m) { Log(LogLevel::kWarning, m); }, true);
  for (auto& reply : table_.AbortAll(AbortedError("the store server is shutting down"))) {
    auto it = conns_.find(reply.client);
    if (it != conns_.end() && !it->second.dead)
      Queue(it->second, EncodeStoreResponse(reply.response));
  }
  conns_.clear();
}

void TcpStoreServer::Loop::AcceptAll(TimePoint now) {
  for (int i = 0; i < kMaxAcceptsPerWake; ++i) {
    std::string peer;
    Result<net::Fd> fd = net::Accept(listener_.get(), TimePoint::min(), &peer);
    if (!fd.ok()) {
      if (fd.status().code() != StatusCode::kTimeout) {  // e.g. out of descriptors
        Log(LogLevel::kWarning, fd.status().message() + "; pausing accepts for 100 ms");
        listener_paused_until_ = now + std::chrono::milliseconds(100);
      }
      return;
    }
    Result<net::ServerHandshake> hs = net::ServerHandshake::Create(secret_);
    if (!hs.ok()) {
      Log(LogLevel::kError, "cannot authenticate " + peer + ": " + hs.status().message());
      continue;
    }
    Connection& c = conns_[next_id_];
    c.id = next_id_++;
    c.fd = std::move(fd).value();
    c.peer = peer;
    c.handshake_deadline = now + options_.handshake_timeout;
    c.handshake = std::move(hs).value();
    Queue(c, c.handshake->hello());
  }
}

void TcpStoreServer::Loop::OnReadable(Connection& c, TimePoint now) {
  // During the handshake read only the client's response, nothing beyond it.
  const size_t want = c.handshake ? net::kAuthResponseBytes - c.in.size() : kReadChunk;
  const size_t old = c.in.size();
  c.in.resize(old + want);
  const ssize_t got = recv(c.fd.get(), c.in.data() + old, want, MSG_DONTWAIT);
  c.in.resize(old + (got > 0 ? static_cast<size_t>(got) : 0));
  if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    return Drop(c, got == 0 ? "client closed the connection" : std::strerror(errno), false);
  }
  if (got < 0) return;
  if (c.handshake) {
    if (c.in.size() == net::kAuthResponseBytes) FinishHandshake(c);
    return;
  }
  ServeInput(c, now);
}

void TcpStoreServer::Loop::FinishHandshake(Connection& c) {
  Result<Bytes> proof = c.handshake->Finish(c.in.data(), c.in.size());
  if (!proof.ok()) return Refuse(c);
  c.handshake.reset();
  c.in.clear();
  counters_->authenticated.fetch_add(1);
  Log(LogLevel::kDebug, "authenticated client " + c.peer);
  Queue(c, *proof);
}

void TcpStoreServer::Loop::ServeInput(Connection& c, TimePoint now) {
  while (!c.dead && !c.parked && c.pending_out() < kMaxPendingOutput) {
    const uint8_t* p = c.in.data() + c.in_off;
    const size_t avail = c.in.size() - c.in_off;
    if (avail < kStoreHeaderBytes) break;
    Result<StoreHeader> header = DecodeStoreHeader(p, avail);
    if (!header.ok()) return Drop(c, header.status().message(), true);
    const size_t body = header->body_length;
    if (avail - kStoreHeaderBytes < body) break;
    Result<StoreRequest> request = DecodeStoreRequest(*header, p + kStoreHeaderBytes, body);
    if (!request.ok()) return Drop(c, request.status().message(), true);
    c.in_off += kStoreHeaderBytes + body;
    std::optional<StoreResponse> response = table_.Apply(c.id, *request, now);
    if (response) {
      Queue(c, EncodeStoreResponse(*response));
    } else {
      c.parked = true;
    }
  }
  if (c.in_off > 0) {
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(c.in_off));
    c.in_off = 0;
  }
}

void TcpStoreServer::Loop::ReleaseParked(TimePoint now) {
  for (;;) {
    std::vector<StoreTable::Reply> replies = table_.Release(now);
    if (replies.empty() && resume_.empty()) return;
    for (const auto& reply : replies) {
      auto it = conns_.find(reply.client);
      if (it == conns_.end() || it->second.dead) continue;
      it->second.parked = false;
      Queue(it->second, EncodeStoreResponse(reply.response));
      resume_.push_back(reply.client);
    }
    std::vector<uint64_t> ids;
    ids.swap(resume_);
    for (uint64_t id : ids) {
      auto it = conns_.find(id);
      if (it != conns_.end() && !it->second.dead) ServeInput(it->second, now);
    }
  }
}

void TcpStoreServer::Loop::Queue(Connection& c, const Bytes& message) {
  c.out.insert(c.out.end(), message.begin(), message.end());
  Flush(c);
}

void TcpStoreServer::Loop::Flush(Connection& c) {
  const bool was_full = c.pending_out() >= kMaxPendingOutput;
  while (c.pending_out() > 0) {
    const ssize_t sent =
        send(c.fd.get(), c.out.data() + c.out_off, c.pending_out(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent > 0) {
      c.out_off += static_cast<size_t>(sent);
    } else if (sent < 0 && errno == EINTR) {
      continue;
    } else if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else {
      return Drop(c, std::string("send failed: ") + std::strerror(errno), false);
    }
  }
  if (c.pending_out() == 0) {
    c.out.clear();
    c.out_off = 0;
  }
  // Requests left unparsed while the output was full can go on now.
  if (was_full && c.pending_out() < kMaxPendingOutput) resume_.push_back(c.id);
}

void TcpStoreServer::Loop::Refuse(Connection& c) {
  c.dead = true;
  refusals_.Note(Clock::now(), "refused connection from " + c.peer + ": authentication failed",
                 [&](const std::string& m) { Log(LogLevel::kWarning, m); });
  counters_->refused.fetch_add(1);
}

void TcpStoreServer::Loop::Drop(Connection& c, const std::string& why, bool malformed) {
  if (c.handshake) return Refuse(c);  // whatever ended it, it never authenticated
  c.dead = true;
  Log(malformed ? LogLevel::kWarning : LogLevel::kDebug,
      "closed connection from " + c.peer + ": " + why);
  if (malformed) counters_->malformed.fetch_add(1);
}

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& bind_host,
                                                              uint16_t port,
                                                              std::string_view secret,
                                                              std::optional<Logger> logger,
                                                              TcpStoreServerOptions options) {
  if (secret.empty()) return InvalidArgument("store server: the job secret is empty");
  HORA_ASSIGN_OR_RETURN(net::Fd listener, net::Listen(bind_host, port, options.backlog));
  net::Fd wake(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) return InternalError(std::string("eventfd: ") + std::strerror(errno));
  std::unique_ptr<TcpStoreServer> server(new TcpStoreServer());
  HORA_ASSIGN_OR_RETURN(server->port_, net::LocalPort(listener));
  server->loop_ = std::make_unique<Loop>(std::move(listener), std::move(wake), std::string(secret),
                                         logger, options, &server->counters_);
  server->thread_ = std::thread([loop = server->loop_.get()] {
    NameThisThread("hora-store");
    loop->Run();
  });
  if (logger) {
    logger->Info("store server: listening on " +
                 (bind_host.empty() ? std::string("*") : bind_host) + " port " +
                 std::to_string(server->port_));
  }
  return server;
}

TcpStoreServer::~TcpStoreServer() {
  if (loop_) loop_->Stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace hora
