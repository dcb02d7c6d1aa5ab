// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A process set's windows made by its members together
// (process_set_windows.h), ranks as threads on the loopback transport: every
// member gets them, or, where one member cannot make or open its side, none
// does, each with a warning naming that member; a transport without windows
// exchanges nothing.
#include "api/process_set_windows.h"

#include <gtest/gtest.h>

#include "support/forwarding_transport.h"
#include "support/window_groups.h"
#include "transport/combinators/subset/subset_transport.h"

namespace hora {
namespace {

using testing::ForwardingTransport;

// Its side of a group fails where `fail` says: to be made, or to open.
class FailingSide final : public PendingGroupWindows {
 public:
  explicit FailingSide(std::unique_ptr<PendingGroupWindows> inner) : inner_(std::move(inner)) {}
  const std::string& token() const override { return inner_->token(); }
  Result<std::unique_ptr<GroupWindows>> Open(std::span<const std::string>) override {
    return UnavailableError("no room for a mapping (a test's)");
  }

 private:
  std::unique_ptr<PendingGroupWindows> inner_;
};

enum class Fail { kNothing, kPrepare, kOpen, kNoWindows };

class FailingTransport final : public ForwardingTransport {
 public:
  FailingTransport(std::unique_ptr<Transport> inner, Fail fail)
      : ForwardingTransport(std::move(inner)), fail_(fail) {}
  Result<std::unique_ptr<PendingGroupWindows>> PrepareGroupWindows(std::span<const int> ranks,
                                                                   uint64_t key) override {
    if (fail_ == Fail::kPrepare) return UnavailableError("/dev/shm is full (a test's)");
    if (fail_ == Fail::kNoWindows) return std::unique_ptr<PendingGroupWindows>();
    auto p = ForwardingTransport::PrepareGroupWindows(ranks, key);
    if (!p.ok() || fail_ != Fail::kOpen) return p;
    return std::unique_ptr<PendingGroupWindows>(new FailingSide(std::move(*p)));
  }
  Request Isend(int peer, Tag tag, const void* data, size_t bytes) override {
    ++sends;
    return ForwardingTransport::Isend(peer, tag, data, bytes);
  }
  int sends = 0;

 private:
  const Fail fail_;
};

struct Outcome {
  std::vector<int> windows;  // by rank: 1 where it got them (one int each: threads write them)
  std::string log;
  int sends = 0;  // messages, all ranks
};

// Rank 1 of 3 fails as `fail`, the others not (all ranks, with kNoWindows).
Outcome Make(Fail fail) {
  const int n = 3;
  auto inner = testing::LoopbackGroup(n);
  std::vector<std::unique_ptr<Transport>> ts;
  for (int r = 0; r < n; ++r) {
    const Fail f = fail == Fail::kNoWindows || r == 1 ? fail : Fail::kNothing;
    ts.push_back(std::make_unique<FailingTransport>(std::move(inner[static_cast<size_t>(r)]), f));
  }
  const std::vector<int> ranks = {0, 1, 2};
  Outcome out{std::vector<int>(n), ""};
  ::testing::internal::CaptureStderr();
  auto st = testing::OnRanks(ts, [&](int r, Transport& t) -> Status {
    const Logger logger(LogLevel::kWarning, r);
    SubsetTransport view(t, ranks);
    HORA_ASSIGN_OR_RETURN(std::unique_ptr<GroupWindows> w,
                          OpenProcessSetWindows(t, view, ranks, 4, 6, WaitPolicy{}, &logger));
    out.windows[static_cast<size_t>(r)] = w != nullptr && w->Window(1) != nullptr ? 1 : 0;
    return Status::Ok();
  });
  out.log = ::testing::internal::GetCapturedStderr();
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
    out.sends += static_cast<FailingTransport&>(*ts[static_cast<size_t>(r)]).sends;
  }
  return out;
}

TEST(ProcessSetWindows, EveryMemberGetsThem) {
  const Outcome o = Make(Fail::kNothing);
  EXPECT_EQ(o.windows, std::vector<int>({1, 1, 1}));
  EXPECT_EQ(o.log, "");
  EXPECT_GT(o.sends, 0);
}

TEST(ProcessSetWindows, AMemberThatCannotMakeItsSideLeavesEveryoneWithoutAndNamed) {
  for (Fail f : {Fail::kPrepare, Fail::kOpen}) {
    const Outcome o = Make(f);
    EXPECT_EQ(o.windows, std::vector<int>({0, 0, 0}));
    EXPECT_NE(o.log.find(f == Fail::kPrepare ? "/dev/shm is full" : "no room for a mapping"),
              std::string::npos)
        << o.log;
    // Every member says who failed.
    for (int r = 0; r < 3; ++r) {
      const std::string line = "[hora rank " + std::to_string(r) + "]";
      const size_t at = o.log.find(line +
                                   " WARNING: process set 4's shared-memory windows are "
                                   "not used: rank 1 could not make or open theirs");
      EXPECT_NE(at, std::string::npos) << o.log;
    }
  }
}

TEST(ProcessSetWindows, AMemberThatNeverComesFailsTheOthersAtTheTimeoutNamed) {
  const int n = 3;
  auto ts = testing::LoopbackGroup(n);
  const std::vector<int> ranks = {0, 1, 2};
  WaitPolicy waits;
  waits.timeout = std::chrono::milliseconds(300);
  auto st = testing::OnRanks(ts, [&](int r, Transport& t) -> Status {
    if (r == 2) return Status::Ok();  // never makes its side
    SubsetTransport view(t, ranks);
    return OpenProcessSetWindows(t, view, ranks, 4, 6, waits, nullptr).status();
  });
  // (Rank 0 waits for rank 2 itself; rank 1, in the ring, for what rank 0
  // passes on from it.)
  for (int r = 0; r < 2; ++r) EXPECT_EQ(st[r].code(), StatusCode::kTimeout) << st[r].ToString();
  EXPECT_NE(st[0].message().find("waiting for rank 2"), std::string::npos) << st[0].ToString();
}

TEST(ProcessSetWindows, ATransportWithoutWindowsExchangesNothing) {
  const Outcome o = Make(Fail::kNoWindows);
  EXPECT_EQ(o.windows, std::vector<int>({0, 0, 0}));
  EXPECT_EQ(o.log, "");
  EXPECT_EQ(o.sends, 0);
}

}  // namespace
}  // namespace hora
