// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The accepting half of the TCP mesh (tcp_mesh.h): every incoming
// connection's handshake runs at once with the others in one poll loop,
// each bounded by its own short deadline, so that a connection that says
// nothing, or says garbage, holds only its own slot until it is closed; the
// ranks' own connections go on beside it.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <optional>

#include "common/log_limiter.h"
#include "net/auth.h"
#include "transport/tcp/tcp_mesh.h"

namespace hora {
namespace {

// How long one connection has for the handshake and its rank.
constexpr Duration kHandshakeTimeout = std::chrono::seconds(10);
// Handshakes in progress at most; a new connection beyond them takes the
// place of the oldest (a rank's own takes milliseconds: the oldest is a
// stranger's that stays silent).
constexpr size_t kMaxHandshakes = 64;

// One connection in its handshake: the server's side of net/auth.h, then
// the 4 bytes of the peer's rank.
struct Incoming {
  net::Fd fd;
  std::string from;
  std::optional<net::ServerHandshake> handshake;  // (set once accepted)
  TimePoint until;
  std::vector<uint8_t> out;  // to send: the hello, then the proof
  size_t sent = 0;
  uint8_t in[net::kAuthResponseBytes] = {};
  size_t got = 0;
  bool proved = false;  // the response checked and the proof queued
  int32_t rank = -1;
  size_t rank_got = 0;

  bool Sending() const { return sent < out.size(); }
};

// Moves `c` as far as its socket allows. Returns an error when the
// connection failed (it is then closed), OK otherwise; `*done` once the
// peer's rank is in.
Status Step(Incoming& c, bool* done) {
  while (c.Sending()) {
    const ssize_t w = send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EAGAIN || errno == EINTR) return Status::Ok();
      return UnavailableError("authentication failed");
    }
    c.sent += static_cast<size_t>(w);
  }
  if (!c.proved) {
    const ssize_t r = recv(c.fd.get(), c.in + c.got, sizeof c.in - c.got, 0);
    if (r == 0) return UnavailableError("authentication failed");
    if (r < 0) {
      return errno == EAGAIN || errno == EINTR ? Status::Ok()
                                               : UnavailableError("authentication failed");
    }
    c.got += static_cast<size_t>(r);
    if (c.got < sizeof c.in) return Status::Ok();
    HORA_ASSIGN_OR_RETURN(std::vector<uint8_t> proof, c.handshake->Finish(c.in, sizeof c.in));
    c.out = std::move(proof);
    c.sent = 0;
    c.proved = true;
    return Step(c, done);
  }
  auto* rank = reinterpret_cast<uint8_t*>(&c.rank);
  const ssize_t r = recv(c.fd.get(), rank + c.rank_got, sizeof c.rank - c.rank_got, 0);
  if (r == 0) return UnavailableError("closed before it named its rank");
  if (r < 0) {
    return errno == EAGAIN || errno == EINTR
               ? Status::Ok()
               : UnavailableError(std::string("reading its rank: ") + std::strerror(errno));
  }
  c.rank_got += static_cast<size_t>(r);
  *done = c.rank_got == sizeof c.rank;
  return Status::Ok();
}

}  // namespace

Status AcceptHigherRanks(Store& store, const net::Fd& listener, const TcpMeshOptions& o,
                         TimePoint deadline, std::vector<net::Fd>* peers) {
  const std::string me = "rank " + std::to_string(o.rank);
  LogLimiter refusals;
  auto say = [&](const std::string& m) {
    if (o.logger != nullptr) o.logger->Warning(me + ": " + m);
  };
  auto refuse = [&](Incoming& c, const std::string& why, TimePoint now) {
    refusals.Note(now, "refused connection from " + c.from + ": " + why, say);
  };
  std::list<Incoming> pending;
  int missing = o.size - 1 - o.rank;
  TimePoint look_at = TimePoint::min();  // the next Store::Abandoned() (a round trip)
  while (missing > 0) {
    TimePoint now = Clock::now();
    if (now >= deadline) {
      refusals.Flush(now, say, true);
      return TimeoutError(me + " waited for " + std::to_string(missing) +
                          " higher rank(s) to connect: none came within the start timeout "
                          "(HORA_START_TIMEOUT_S)");
    }
    std::vector<pollfd> fds = {{listener.get(), POLLIN, 0}};
    TimePoint wake = deadline;
    for (const Incoming& c : pending) {
      fds.push_back({c.fd.get(), static_cast<short>(c.Sending() ? POLLOUT : POLLIN), 0});
      wake = std::min(wake, c.until);
    }
    // (Slices of at most 100 ms: every 100 ms, whether the world this
    // mesh is for was abandoned: Store::Abandoned.)
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
    if (poll(fds.data(), fds.size(), static_cast<int>(std::clamp<int64_t>(ms, 0, 100))) < 0 &&
        errno != EINTR) {
      return UnavailableError(me + ": poll: " + std::strerror(errno));
    }
    now = Clock::now();
    if (now >= look_at) {
      HORA_RETURN_IF_ERROR(store.Abandoned().WithContext(
          me + " waiting for " + std::to_string(missing) + " higher rank(s) to connect"));
      look_at = now + std::chrono::milliseconds(100);
    }
    size_t k = 1;
    for (auto it = pending.begin(); it != pending.end(); ++k) {
      Incoming& c = *it;
      bool done = false;
      Status st = fds[k].revents != 0 ? Step(c, &done) : Status::Ok();
      if (st.ok() && !done && now >= c.until) {
        st = UnavailableError(
            "no handshake within " +
            std::to_string(
                std::chrono::duration_cast<std::chrono::seconds>(kHandshakeTimeout).count()) +
            " s");
      }
      if (!st.ok()) {
        refuse(c, st.message(), now);
        it = pending.erase(it);
        continue;
      }
      if (!done) {
        ++it;
        continue;
      }
      // Authenticated: one of this job's ranks, whose claim is trusted as
      // far as it is consistent.
      if (c.rank <= o.rank || c.rank >= o.size || (*peers)[static_cast<size_t>(c.rank)].valid()) {
        return InvalidArgument(me + ": connection from " + c.from + " claims rank " +
                               std::to_string(c.rank));
      }
      (*peers)[static_cast<size_t>(c.rank)] = std::move(c.fd);
      --missing;
      it = pending.erase(it);
    }
    if ((fds[0].revents & POLLIN) == 0) continue;
    for (;;) {  // every connection waiting in the backlog
      Incoming c;
      auto fd = net::Accept(listener.get(), TimePoint::min(), &c.from);
      if (!fd.ok()) break;
      c.fd = std::move(fd).value();
      if (pending.size() >= kMaxHandshakes) {
        refuse(pending.front(), "too many connections in their handshake", now);
        pending.pop_front();
      }
      HORA_ASSIGN_OR_RETURN(net::ServerHandshake hs, net::ServerHandshake::Create(o.secret));
      c.handshake.emplace(std::move(hs));
      c.out = c.handshake->hello();
      c.until = std::min(deadline, now + kHandshakeTimeout);
      pending.push_back(std::move(c));
    }
  }
  refusals.Flush(Clock::now(), say, true);
  return Status::Ok();
}

}  // namespace hora
