// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Lost or slow (docs/dev/design.md §6), between real processes, over shm and TCP:
// rank 1 is a forked child, rank 0 this process, waiting for 4 bytes from
// it. A child frozen (SIGSTOP) is lost once its heartbeat has been silent
// for the peer timeout; one that ended without closing its transport is
// lost at once; one that is busy (its user code asleep) is neither: its
// transport's own thread keeps beating.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "support/file_store.h"
#include "transport/shm/shm_segment.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"

namespace hora {
namespace {

using std::chrono::milliseconds;

enum class Fate { kStop, kExit, kBusy, kPausedTogether };
constexpr Duration kPeerTimeout = std::chrono::seconds(1);

Result<std::unique_ptr<Transport>> Create(bool tcp, int rank, Store& store,
                                          const std::string& job) {
  if (!tcp) {
    return CreateShmTransport(rank, 2, store, job,
                              ShmOptions{std::chrono::seconds(30), kShmSpin, kPeerTimeout, {}, 0});
  }
  TcpMeshOptions o{rank, 2, job, "s3cret", "127.0.0.1", std::chrono::seconds(30)};
  o.peer_timeout = kPeerTimeout;
  return CreateTcpTransport(store, o);
}

// Rank 1's life; returns its exit code.
int Child(bool tcp, Fate fate, const std::string& dir, const std::string& job) {
  testing::FileStore store(dir);
  auto t = Create(tcp, 1, store, job);
  if (!t.ok()) {
    std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
    return 2;
  }
  switch (fate) {
    case Fate::kStop:
      raise(SIGSTOP);
      return 0;
    case Fate::kExit:
      std::this_thread::sleep_for(milliseconds(200));
      _exit(0);  // the transport is never closed
    case Fate::kBusy:
    case Fate::kPausedTogether: {
      std::this_thread::sleep_for(std::chrono::seconds(3));  // three peer timeouts
      int32_t x = 42;
      Request s = (*t)->Isend(0, 1, &x, sizeof x);
      return (*t)->Wait(s, Clock::now() + std::chrono::seconds(20)).ok() ? 0 : 3;
    }
  }
  return 4;
}

struct Outcome {
  Status status;
  double seconds = 0;
  int silent_peer = -2;  // Transport::SilentPeer() after the wait
};

Outcome RunTrial(bool tcp, Fate fate) {
  char tmpl[] = "/tmp/hora-live-store-XXXXXX";
  EXPECT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string job = "test-live-" + std::to_string(getpid()) + (tcp ? "-tcp" : "-shm") +
                          std::to_string(static_cast<int>(fate));
  const pid_t child = fork();
  if (child == 0) _exit(Child(tcp, fate, dir, job));
  Outcome out;
  {
    testing::FileStore store(dir);
    auto t = Create(tcp, 0, store, job);
    if (!t.ok()) {
      out.status = t.status();
    } else {
      int32_t x = 0;
      Request r = (*t)->Irecv(1, 1, &x, sizeof x);
      pid_t pauser = -1;
      if (fate == Fate::kPausedTogether) {
        // The whole job stops for 2.5 peer timeouts (a scheduler's suspend),
        // then goes on: the other process stops a little before this one
        // and goes on a little after it, so that this one's watcher sees
        // the other's heartbeat unchanged from before the pause.
        const pid_t me = getpid();
        pauser = fork();
        if (pauser == 0) {
          const timespec pause{2, 500'000'000}, lag{0, 300'000'000};
          kill(child, SIGSTOP);
          nanosleep(&lag, nullptr);
          kill(me, SIGSTOP);
          nanosleep(&pause, nullptr);
          kill(me, SIGCONT);
          nanosleep(&lag, nullptr);
          kill(child, SIGCONT);
          _exit(0);
        }
      }
      const TimePoint start = Clock::now();
      out.status = (*t)->Wait(r, start + std::chrono::seconds(20));
      out.seconds = DurationToSeconds(Clock::now() - start);
      out.silent_peer = (*t)->SilentPeer();
      if (pauser > 0) waitpid(pauser, nullptr, 0);
      if (out.status.ok() && x != 42) out.status = InternalError("got " + std::to_string(x));
    }
    kill(child, SIGKILL);  // (a stopped child too)
    int status = 0;
    waitpid(child, &status, 0);
  }
  std::filesystem::remove_all(dir);
  return out;
}

class Liveness : public ::testing::TestWithParam<bool> {};

TEST_P(Liveness, AFrozenRankIsLostAfterThePeerTimeout) {
  Outcome o = RunTrial(GetParam(), Fate::kStop);
  EXPECT_EQ(o.status.code(), StatusCode::kUnavailable) << o.status.ToString();
  EXPECT_NE(o.status.message().find("no sign of life"), std::string::npos) << o.status.message();
  EXPECT_NE(o.status.message().find("HORA_PEER_TIMEOUT_S"), std::string::npos);
  EXPECT_GE(o.seconds, 0.5);
  EXPECT_LT(o.seconds, 6.0);
  EXPECT_EQ(o.silent_peer, 1);  // (what an elastic worker tells horarun)
}

TEST_P(Liveness, ARankWhoseProcessEndedIsLostAtOnce) {
  Outcome o = RunTrial(GetParam(), Fate::kExit);
  EXPECT_EQ(o.status.code(), StatusCode::kUnavailable) << o.status.ToString();
  EXPECT_NE(o.status.message().find("rank 1"), std::string::npos) << o.status.message();
  EXPECT_LT(o.seconds, 2.0);
  EXPECT_EQ(o.silent_peer, -1);  // ended, not silent
}

TEST_P(Liveness, AJobPausedAsAWholeGoesOn) {
  Outcome o = RunTrial(GetParam(), Fate::kPausedTogether);
  EXPECT_TRUE(o.status.ok()) << o.status.ToString();
}

TEST_P(Liveness, ABusyRankIsNotLost) {
  Outcome o = RunTrial(GetParam(), Fate::kBusy);
  EXPECT_TRUE(o.status.ok()) << o.status.ToString();
  EXPECT_GE(o.seconds, 2.0);
}

INSTANTIATE_TEST_SUITE_P(Transports, Liveness, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Tcp" : "Shm";
                         });

}  // namespace
}  // namespace hora
