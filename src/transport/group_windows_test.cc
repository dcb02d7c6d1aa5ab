// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Windows of some of a transport's ranks (GroupWindows, shared_window.h) on
// both transports that offer them, ranks as threads: a group's windows
// number its members from 0 and keep the window contract (data written
// before a step is seen after it) while another group's run at once; they
// carry the *_shared allreduce over the group's ranks (checked
// against sums computed here, from empty to several rounds of the window);
// a member that closes fails the others' steps at once, named as the job
// numbers it. Over shared memory: a group's segments are named for the job
// (so that horarun's cleanup finds them) until sealed, and gone after; a
// token that is not a member's segment of this group is refused, naming
// the member.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <barrier>

#include "collectives/algorithms.h"
#include "collectives/comm.h"
#include "support/window_groups.h"
#include "transport/combinators/subset/subset_transport.h"
#include "transport/shm/shm_segment.h"

namespace hora {
namespace {

using std::chrono::seconds;
using testing::OnRanks;

class GroupWindowsTest : public testing::WindowGroupTest {};

// The members' tokens, gathered as ranks of one process can: each writes
// its own, then all wait for the others.
struct Tokens {
  explicit Tokens(size_t n) : all(n), sync(static_cast<std::ptrdiff_t>(n)) {}
  std::vector<std::string> all;
  std::barrier<> sync;
};

// Prepares and opens the windows of `members` (group `key`) on member
// `i`; `seal` false leaves the segment named.
Result<std::unique_ptr<GroupWindows>> Make(Transport& t, const std::vector<int>& members, size_t i,
                                           uint64_t key, Tokens& tokens, bool seal = true) {
  Result<std::unique_ptr<PendingGroupWindows>> p = t.PrepareGroupWindows(members, key);
  if (!p.ok()) return p.status();
  if (*p == nullptr) return InternalError("no group windows on a transport with windows");
  tokens.all[i] = (*p)->token();
  tokens.sync.arrive_and_wait();
  Result<std::unique_ptr<GroupWindows>> w = (*p)->Open(tokens.all);
  tokens.sync.arrive_and_wait();  // every member has opened (or failed)
  if (w.ok() && seal) HORA_RETURN_IF_ERROR((*w)->Seal());
  return w;
}

size_t Index(const std::vector<int>& members, int rank) {
  return static_cast<size_t>(std::find(members.begin(), members.end(), rank) - members.begin());
}

TEST_P(GroupWindowsTest, TwoGroupsWindowsNumberTheirMembersAndRunAtOnce) {
  const int n = 4;
  auto ts = Group(n);
  const std::vector<int> odd = {1, 3}, even = {0, 2};
  Tokens odd_tokens(2), even_tokens(2);
  auto st = OnRanks(ts, [&](int r, Transport& t) -> Status {
    const std::vector<int>& members = r % 2 ? odd : even;
    const size_t me = Index(members, r);
    HORA_ASSIGN_OR_RETURN(std::unique_ptr<GroupWindows> g,
                          Make(t, members, me, r % 2 ? 7 : 8, r % 2 ? odd_tokens : even_tokens));
    if (g->Window(0) != nullptr || g->Window(3) != nullptr)
      return InternalError("a group has a data and a control window only");
    for (uint32_t c : {1u, 2u}) {
      SharedWindow& w = *g->Window(c);
      if (w.rank() != static_cast<int>(me) || w.size() != 2 || w.bytes() != SharedWindowBytes(c))
        return InternalError("window " + std::to_string(c) + ": rank " + std::to_string(w.rank()) +
                             " of " + std::to_string(w.size()));
      for (int round = 0; round < 50; ++round) {
        const size_t half = w.NextHalf() * (w.bytes() / 2);
        auto* mine = reinterpret_cast<uint64_t*>(w.local() + half);
        mine[0] = 1000u * round + static_cast<uint64_t>(r);
        HORA_RETURN_IF_ERROR(w.Step(static_cast<uint64_t>(r), Clock::now() + seconds(30)));
        const size_t other = 1 - me;
        const auto* theirs =
            reinterpret_cast<const uint64_t*>(w.region(static_cast<int>(other)) + half);
        const uint64_t want = 1000u * round + static_cast<uint64_t>(members[other]);
        if (theirs[0] != want ||
            w.word(static_cast<int>(other)) != static_cast<uint64_t>(members[other]))
          return InternalError("round " + std::to_string(round) + ": read " +
                               std::to_string(theirs[0]) + ", want " + std::to_string(want));
      }
    }
    return Status::Ok();
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
}

TEST_P(GroupWindowsTest, TheSharedAllreduceOverAGroupMatchesTheReference) {
  const int n = 5;
  auto ts = Group(n);
  const std::vector<int> members = {0, 2, 3};
  Tokens tokens(members.size());
  auto st = OnRanks(ts, [&](int r, Transport& t) -> Status {
    const size_t me = Index(members, r);
    if (me == members.size()) return Status::Ok();
    HORA_ASSIGN_OR_RETURN(std::unique_ptr<GroupWindows> g, Make(t, members, me, 9, tokens));
    SubsetTransport view(t, members);
    Comm comm(view, WaitPolicy{}, 64 << 10, 1, g->Window(1));
    // Empty, one element, odd, two steps, and past one round of the window.
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{5001}, size_t{700001}}) {
      std::vector<float> v(count);
      for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(r * 3 + static_cast<int>(i % 5));
      HORA_RETURN_IF_ERROR(
          AllreduceShared(comm, {v.data(), v.data(), count, DataType::kFloat32, {ReduceOp::kSum}}));
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int m : members) want += static_cast<float>(m * 3 + static_cast<int>(i % 5));
        if (v[i] != want)
          return InternalError(std::to_string(count) + " elements: [" + std::to_string(i) +
                               "] = " + std::to_string(v[i]) + ", want " + std::to_string(want));
      }
    }
    return Status::Ok();
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
}

TEST_P(GroupWindowsTest, AMemberThatClosesFailsTheOthersNamedAsTheJobNumbersIt) {
  const int n = 3;
  auto ts = Group(n);
  const std::vector<int> members = {0, 2};
  Tokens tokens(members.size());
  std::vector<std::unique_ptr<GroupWindows>> made(members.size());
  OnRanks(ts, [&](int r, Transport& t) -> Status {
    const size_t me = Index(members, r);
    if (me == members.size()) return Status::Ok();
    HORA_ASSIGN_OR_RETURN(made[me], Make(t, members, me, 3, tokens));
    return Status::Ok();
  });
  ASSERT_TRUE(made[0] && made[1]);
  made[1].reset();
  ts[2].reset();  // rank 2's session ended
  const auto start = Clock::now();
  Status step = made[0]->Window(2)->Step(1, Clock::now() + seconds(60));
  EXPECT_EQ(step.code(), StatusCode::kUnavailable) << step.ToString();
  EXPECT_NE(step.message().find("rank 2"), std::string::npos) << step.message();
  EXPECT_LT(Clock::now() - start, seconds(10));
}

// The job id in a group segment's name "/hora-<job>-set<key>-win-...".
std::string JobOf(const std::string& name, uint64_t key) {
  const std::string mark = "-set" + std::to_string(key) + "-win-";
  return name.substr(6, name.find(mark) - 6);
}

bool Exists(const std::string& name) {
  struct stat st {};
  return stat(("/dev/shm" + name).c_str(), &st) == 0;
}

// (Shared memory only: the loopback transport's windows are its hub's
// memory, and its tokens carry nothing.)
TEST(GroupWindowsShm, SegmentsAreListedForTheJobUntilSealedAndBadTokensRefused) {
  const int n = 3;
  auto ts = testing::ShmGroup(n, kShmSpin);
  const std::vector<int> members = {0, 1, 2};
  Tokens tokens(members.size());
  std::vector<std::unique_ptr<GroupWindows>> made(members.size());
  OnRanks(ts, [&](int r, Transport& t) -> Status {
    HORA_ASSIGN_OR_RETURN(made[static_cast<size_t>(r)],
                          Make(t, members, static_cast<size_t>(r), 5, tokens, /*seal=*/false));
    return Status::Ok();
  });
  ASSERT_TRUE(made[0] && made[1] && made[2]);
  const std::string job = JobOf(tokens.all[0], 5);
  EXPECT_EQ(ListShmSegments(job).size(), 3u) << tokens.all[0];
  for (auto& g : made) ASSERT_TRUE(g->Seal().ok());
  EXPECT_TRUE(ListShmSegments(job).empty());
  for (const std::string& name : tokens.all) EXPECT_FALSE(Exists(name)) << name;

  // Rank 1 offers rank 2's name: rank 0 refuses it, naming rank 1.
  Tokens bad(members.size());
  auto st = OnRanks(ts, [&](int r, Transport& t) -> Status {
    Result<std::unique_ptr<PendingGroupWindows>> p = t.PrepareGroupWindows(members, 6);
    HORA_RETURN_IF_ERROR(p.status());
    bad.all[static_cast<size_t>(r)] = (*p)->token();
    bad.sync.arrive_and_wait();
    std::vector<std::string> given = bad.all;
    given[1] = bad.all[2];
    Status opened = (*p)->Open(given).status();
    bad.sync.arrive_and_wait();
    return opened;
  });
  EXPECT_EQ(st[0].code(), StatusCode::kUnavailable) << st[0].ToString();
  EXPECT_NE(st[0].message().find("rank 1 offered"), std::string::npos) << st[0].message();
  EXPECT_FALSE(st[2].ok());
  EXPECT_TRUE(ListShmSegments(JobOf(bad.all[0], 6)).empty()) << "left after a failed open";
}

INSTANTIATE_TEST_SUITE_P(Transports, GroupWindowsTest, ::testing::Values("loopback", "shm"),
                         testing::TransportName);

}  // namespace
}  // namespace hora
