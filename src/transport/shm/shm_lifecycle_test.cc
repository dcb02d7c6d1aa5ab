// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Timeouts, cancellation, closing, and the segments' mode and cleanup.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <barrier>
#include <thread>

#include "support/shm_test_util.h"

namespace hora {
namespace {

using shm_test::RunRanks;
using shm_test::Soon;
using shm_test::UniqueJobId;

TimePoint In(int ms) { return Clock::now() + std::chrono::milliseconds(ms); }

TEST(ShmLifecycle, WaitIsBoundedAndNamesPeerAndSize) {
  std::barrier sync(2);  // neither closes early (a closed peer fails receives at once)
  RunRanks(2, UniqueJobId("timeout"), [&](Transport& t) {
    const int peer = 1 - t.rank();
    int x = 0;
    std::vector<uint8_t> big(16 << 20);
    Request r = t.Irecv(peer, 3, &x, sizeof x);
    const TimePoint start = Clock::now();
    Status st = t.Wait(r, In(50));
    EXPECT_EQ(st.code(), StatusCode::kTimeout);
    EXPECT_NE(st.message().find("receiving 4 B from rank " + std::to_string(peer)),
              std::string::npos)
        << st.message();
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));  // generous: a loaded machine
    t.Cancel(r);
    EXPECT_EQ(r->status().code(), StatusCode::kAborted);
    sync.arrive_and_wait();  // no receive is posted any more
    if (t.rank() == 0) {     // nobody receives: the ring fills and the send stalls
      Request s = t.Isend(1, 4, big.data(), big.size());
      st = t.Wait(s, In(50));
      EXPECT_EQ(st.code(), StatusCode::kTimeout);
      EXPECT_NE(st.message().find("sending 16 MiB to rank 1"), std::string::npos) << st.message();
      t.Cancel(s);  // partly in the ring: the channel 0 -> 1 breaks
      st = t.Wait(t.Isend(1, 5, &x, sizeof x), Soon());
      EXPECT_EQ(st.code(), StatusCode::kUnavailable);
      EXPECT_NE(st.message().find("cancelled a message to rank 1 (call 0, phase 0, step 0, "
                                  "segment 4 of context 0)"),
                std::string::npos)
          << st.message();
    }
    sync.arrive_and_wait();
  });
}

TEST(ShmLifecycle, ReceiverLearnsThatTheChannelBroke) {
  std::barrier sync(2);
  RunRanks(2, UniqueJobId("broken"), [&](Transport& t) {
    std::vector<uint8_t> big(16 << 20);
    if (t.rank() == 0) {
      Request s = t.Isend(1, 4, big.data(), big.size());  // fills the ring
      t.Cancel(s);
      sync.arrive_and_wait();
      sync.arrive_and_wait();
    } else {
      sync.arrive_and_wait();
      Status st = t.Wait(t.Irecv(0, 4, big.data(), big.size()), Soon());
      EXPECT_EQ(st.code(), StatusCode::kUnavailable);
      EXPECT_NE(st.message().find("rank 0's shared-memory channel to rank 1 is unusable"),
                std::string::npos)
          << st.message();
      int x = 0;
      EXPECT_EQ(t.Wait(t.Irecv(0, 5, &x, 4), Soon()).code(), StatusCode::kUnavailable);
      sync.arrive_and_wait();
    }
  });
}

TEST(ShmLifecycle, CancelledReceiveIsInertAndTheMessageStays) {
  std::barrier sync(2);
  RunRanks(2, UniqueJobId("cancel"), [&](Transport& t) {
    int a = 99, b = 7, y = 0, z = 0;
    if (t.rank() == 0) {
      sync.arrive_and_wait();
      ASSERT_TRUE(t.Wait(t.Isend(1, 3, &a, 4), Soon()).ok());
      ASSERT_TRUE(t.Wait(t.Isend(1, 4, &b, 4), Soon()).ok());
    } else {
      Request r = t.Irecv(0, 3, &y, 4);
      t.Cancel(r);
      EXPECT_EQ(r->status().code(), StatusCode::kAborted);
      sync.arrive_and_wait();
      ASSERT_TRUE(t.Wait(t.Irecv(0, 4, &z, 4), Soon()).ok());  // sets tag 3 aside
      EXPECT_EQ(z, 7);
      EXPECT_EQ(y, 0);  // the cancelled buffer was not touched
      ASSERT_TRUE(t.Wait(t.Irecv(0, 3, &y, 4), Soon()).ok());
      EXPECT_EQ(y, 99);
    }
  });
}

TEST(ShmLifecycle, CancelMidMessageDiscardsTheRestAndKeepsTheChannel) {
  std::barrier sync(2);
  // (Through the slots: a message read directly is never partly consumed.)
  RunRanks(
      2, UniqueJobId("cancel-mid"),
      [&](Transport& t) {
        std::vector<uint8_t> big(16 << 20, 1), got(big.size(), 0);
        int v = 42, w = 0;
        if (t.rank() == 0) {
          Request s1 = t.Isend(1, 1, big.data(), big.size());  // the first slots go now
          Request s2 = t.Isend(1, 2, &v, 4);
          sync.arrive_and_wait();
          sync.arrive_and_wait();  // receiver has consumed part of tag 1 and cancelled
          ASSERT_TRUE(t.Wait(s1, Soon()).ok());
          ASSERT_TRUE(t.Wait(s2, Soon()).ok());
        } else {
          sync.arrive_and_wait();
          Request r = t.Irecv(0, 1, got.data(), got.size());
          EXPECT_EQ(t.Wait(r, In(50)).code(), StatusCode::kTimeout);
          EXPECT_EQ(got[0], 1);  // it had started
          t.Cancel(r);
          got[0] = 0;
          sync.arrive_and_wait();
          ASSERT_TRUE(t.Wait(t.Irecv(0, 2, &w, 4), Soon()).ok());
          EXPECT_EQ(w, 42);
          EXPECT_EQ(got[0], 0);
        }
      },
      [](int) { return shm_test::Options(0); });
}

TEST(ShmLifecycle, ClosingATransportFailsThePeersReceivesAtOnce) {
  std::barrier sync(2);
  MemoryStore store;
  const std::string job = UniqueJobId("close");
  std::thread peer([&] {
    auto t = CreateShmTransport(0, 2, store, job, std::chrono::seconds(60));
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    int x = 5;
    if (t.ok()) {
      EXPECT_TRUE((*t)->Wait((*t)->Isend(1, 1, &x, 4), Soon()).ok());
    }
    sync.arrive_and_wait();
  });  // destroys rank 0's transport
  auto t = CreateShmTransport(1, 2, store, job, std::chrono::seconds(60));
  sync.arrive_and_wait();
  peer.join();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  int y = 0;
  ASSERT_TRUE((*t)->Wait((*t)->Irecv(0, 1, &y, 4), Soon()).ok());  // already in the ring
  EXPECT_EQ(y, 5);
  const TimePoint start = Clock::now();
  Status st = (*t)->Wait((*t)->Irecv(0, 2, &y, 4), Soon());
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("rank 0 closed its session"), std::string::npos) << st.message();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

TEST(ShmLifecycle, SegmentsAreUnlinkedOnceEveryRankMappedThem) {
  const std::string job = UniqueJobId("unlink");
  std::barrier sync(3);
  std::vector<std::string> listed;
  RunRanks(3, job, [&](Transport& t) {
    sync.arrive_and_wait();  // every rank has returned from creation
    if (t.rank() == 0) listed = ListShmSegments(job);
    sync.arrive_and_wait();
  });
  EXPECT_TRUE(listed.empty()) << listed.front();
  EXPECT_TRUE(ListShmSegments(job).empty());
}

TEST(ShmLifecycle, SegmentsAreExclusive0600AndListedPerJob) {
  const std::string job = UniqueJobId("segments");
  const std::string name = ShmSegmentName(job, "0-1");
  const std::string path = "/dev/shm" + name;
  {
    Result<ShmSegment> seg = ShmSegment::Create(name, 8192);
    ASSERT_TRUE(seg.ok()) << seg.status().ToString();
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(ListShmSegments(job), std::vector<std::string>{name});
    Result<ShmSegment> other = ShmSegment::Create(ShmSegmentName(job + "-2", "0-1"), 4096);
    ASSERT_TRUE(other.ok());
    EXPECT_EQ(ListShmSegments(job).size(), 1u);  // job "<job>-2" is another job
    Status again = ShmSegment::Create(name, 8192).status();
    EXPECT_NE(again.message().find("File exists"), std::string::npos) << again.message();
    EXPECT_FALSE(ShmSegment::Open(name, 4096).ok());  // wrong size
    ASSERT_TRUE(ShmSegment::Open(name, 8192).ok());
    ASSERT_EQ(chmod(path.c_str(), 0644), 0);
    Status open = ShmSegment::Open(name, 8192).status();
    EXPECT_NE(open.message().find("mode 644, expected 600"), std::string::npos) << open.message();
  }  // the creators' destructors unlink
  EXPECT_TRUE(ListShmSegments(job).empty());
  EXPECT_TRUE(ListShmSegments(job + "-2").empty());

  // What a crash during rendezvous leaves, horarun removes.
  // Also a host group's segments in a job spanning hosts ("<job>-g<first rank>").
  for (const char* suffix : {"bell-3", "g4-win-1", "g0-1-0"}) {
    int fd = shm_open(ShmSegmentName(job, suffix).c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    close(fd);
  }
  int fd = shm_open(ShmSegmentName(job, "gx-1-0").c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  close(fd);
  EXPECT_EQ(ListShmSegments(job).size(), 3u);  // not "gx-1-0"
  EXPECT_TRUE(RemoveShmSegments(job).ok());
  EXPECT_TRUE(ListShmSegments(job).empty());
  shm_unlink(ShmSegmentName(job, "gx-1-0").c_str());
}

// What a rank killed during its rendezvous leaves (its segments, named
// with its pid and pid namespace) any later transport of the host removes;
// segments of a live process, of another pid namespace, or of no known
// creator stay.
TEST(ShmLifecycle, SegmentsOfADeadCreatorAreRemoved) {
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);  // its pid now names no process
  const std::string job = UniqueJobId("dead");
  const uint64_t ns = PidNamespaceId();
  const std::string dead = ShmSegmentName(job, "bell-1-" + ShmCreatorTag(gone, ns));
  const std::string live = ShmSegmentName(job, "bell-0-" + ShmCreatorTag(getpid(), ns));
  const std::string other = ShmSegmentName(job, "bell-2-" + ShmCreatorTag(gone, ns + 1));
  const std::string old = ShmSegmentName(job, "bell-3-p" + std::to_string(gone));
  for (const std::string& name : {dead, live, other, old}) {
    int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0) << name;
    close(fd);
  }
  EXPECT_EQ(ListShmSegments(job).size(), 4u);
  MemoryStore store;
  auto alone =
      CreateShmTransport(0, 1, store, job + "-x", Duration::zero());  // sweeps as it starts
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_EQ(ListShmSegments(job), (std::vector<std::string>{live, other, old}));
  for (const std::string& name : {live, other, old}) shm_unlink(name.c_str());
}

TEST(ShmLifecycle, FailedRendezvousLeavesNothingBehind) {
  MemoryStore store;
  const std::string job = UniqueJobId("lonely");
  auto t = CreateShmTransport(0, 2, store, job, std::chrono::milliseconds(100));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kTimeout);
  EXPECT_NE(t.status().message().find("waiting for rank 1"), std::string::npos)
      << t.status().message();
  EXPECT_TRUE(ListShmSegments(job).empty());
  EXPECT_EQ(CreateShmTransport(0, 1, store, "bad/id", Duration::zero()).status().code(),
            StatusCode::kInvalidArgument);
  auto alone = CreateShmTransport(0, 1, store, job + "-alone", Duration::zero());
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();  // a world of one needs nobody
  EXPECT_STREQ((*alone)->name(), "shm");
  EXPECT_TRUE(ListShmSegments(job + "-alone").empty());
}

}  // namespace
}  // namespace hora
