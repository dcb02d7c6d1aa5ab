// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Comm's waits (WaitPolicy): a peer that is slow is waited for and
// reported, by default without end; a user's timeout fails the wait naming
// the rank and the setting; a peer lost elsewhere in the group fails a wait
// on one that is alive. Point to point and on the shared window, ranks as
// threads over the loopback transport.
#include "collectives/comm.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "collectives/algorithms.h"
#include "support/forwarding_transport.h"
#include "transport/loopback/loopback_transport.h"

namespace hora {
namespace {

using std::chrono::milliseconds;

// The loopback transport, with a lost peer that a test can declare.
class LosableTransport final : public testing::ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  const char* name() const override { return "losable"; }
  Status LostPeer() override {
    return lost_.load() ? UnavailableError("rank 2 (pid 7) is gone") : Status::Ok();
  }
  void Lose() { lost_.store(true); }

 private:
  std::atomic<bool> lost_{false};
};

// Ranks 0 and 1 exchange one int (rank 1 `late` late), point to point or
// on the window (context 1). `setup` sees rank 0's Comm first; `after0`,
// once rank 0 returned, rank 1's transport. Returns rank 0's status.
Status Exchange(const WaitPolicy& waits, milliseconds late, bool window,
                const std::function<void(Comm&, LosableTransport&)>& setup = {},
                const std::function<void(LosableTransport&)>& after0 = {}) {
  auto hub = LoopbackHub::Create(2);
  LosableTransport t0(hub->Connect(0)), t1(hub->Connect(1));
  Status st0, st1;
  auto run = [&](LosableTransport& t, Status* out) {
    Comm comm(t, waits, 256 << 10, window ? 1 : 0);
    if (setup && t.rank() == 0) setup(comm, t);
    if (t.rank() == 1) std::this_thread::sleep_for(late);
    int32_t x = t.rank() + 1;
    *out = window ? BarrierShared(comm)
                  : AllreduceRecursiveDoubling(
                        comm, AllreduceArgs{&x, &x, 1, DataType::kInt32, {ReduceOp::kSum}});
  };
  std::thread r1([&] { run(t1, &st1); });
  run(t0, &st0);
  if (after0) after0(t1);
  r1.join();
  return st0;
}

TEST(CommWait, ASlowPeerIsWaitedForAndReported) {
  for (bool window : {false, true}) {
    SCOPED_TRACE(window ? "window" : "point to point");
    Logger logger(LogLevel::kWarning, 0);
    ::testing::internal::CaptureStderr();
    Status st = Exchange({Duration::zero(), milliseconds(150), &logger}, milliseconds(700), window);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_NE(err.find("stall: rank 0: "), std::string::npos) << err;
    EXPECT_NE(err.find(" has waited "), std::string::npos) << err;
    EXPECT_NE(err.find(" for rank 1 ("), std::string::npos) << err;
  }
}

TEST(CommWait, TheUsersTimeoutFailsTheWaitNamingTheRank) {
  for (bool window : {false, true}) {
    SCOPED_TRACE(window ? "window" : "point to point");
    const TimePoint start = Clock::now();
    Status st =
        Exchange({milliseconds(300), Duration::zero(), nullptr}, milliseconds(1500), window);
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
    EXPECT_EQ(st.code(), StatusCode::kTimeout) << st.ToString();
    EXPECT_NE(st.message().find("timed out after 0.3 s (HORA_TIMEOUT_S) waiting for rank 1"),
              std::string::npos)
        << st.message();
  }
}

TEST(CommWait, ASubjectNamesWhatTheWaitIsFor) {
  Logger logger(LogLevel::kWarning, 0);
  ::testing::internal::CaptureStderr();
  Status st = Exchange({milliseconds(500), milliseconds(150), &logger}, milliseconds(1500), false,
                       [](Comm& comm, LosableTransport&) {
                         comm.SetSubject([] { return std::string("allreduce 'grad.w'"); });
                       });
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("stall: rank 0: allreduce 'grad.w' has waited"), std::string::npos) << err;
  EXPECT_NE(st.message().find("rank 0: allreduce 'grad.w': timed out after 0.5 s"),
            std::string::npos)
      << st.message();
}

// A wait on rank 1, alive but late, fails once the transport lost rank 2
// (on rank 1 too, which comes later: it fails as well). Reports every
// 200 ms, to nobody: the wait looks up that often.
TEST(CommWait, APeerLostElsewhereFailsTheWait) {
  for (bool window : {false, true}) {
    SCOPED_TRACE(window ? "window" : "point to point");
    Logger quiet(LogLevel::kOff, 0);
    std::atomic<LosableTransport*> rank0{nullptr};
    std::thread loser([&] {
      std::this_thread::sleep_for(milliseconds(300));
      LosableTransport* t = nullptr;
      while ((t = rank0.load()) == nullptr) std::this_thread::yield();
      t->Lose();
    });
    Status st = Exchange(
        {Duration::zero(), milliseconds(200), &quiet}, milliseconds(1200), window,
        [&](Comm&, LosableTransport& t) { rank0.store(&t); },
        [](LosableTransport& t1) { t1.Lose(); });
    loser.join();
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
    EXPECT_NE(st.message().find("rank 2 (pid 7) is gone"), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace hora
