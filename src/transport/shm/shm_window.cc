// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/shm/shm_window.h"

#include <algorithm>
#include <atomic>
#include <new>
#include <thread>

#include "transport/shm/shm_transport.h"
#include "transport/shm/shm_transport_impl.h"

namespace hora {
namespace {

constexpr uint32_t kMagic = 0x6e697768;  // "hwin"
constexpr uint32_t kVersion = 2;
constexpr size_t kDataOffset = 4096;

struct alignas(64) Header {
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  uint64_t bytes = 0;                  // of the whole segment
  std::atomic<uint32_t> closed{0};     // the owner's transport is gone
  std::atomic<uint64_t> heartbeat{0};  // bumped by the owner's heartbeat thread
};

static_assert(sizeof(ShmWindowLine) == 64, "a step line is one cache line");
static_assert((1 + kSharedWindowContexts) * 64 <= kDataOffset, "step lines overlap the regions");

size_t RegionOffset(uint32_t context, uint32_t first) {
  size_t offset = kDataOffset;
  for (uint32_t c = first; c < context; ++c) offset += SharedWindowBytes(c);
  return offset;
}

// The group a window's rank belongs to, and its place in it.
int WindowRank(const ShmTransport& t, const std::vector<int>& members) {
  if (members.empty()) return t.rank();
  const auto it = std::find(members.begin(), members.end(), t.rank());
  return it == members.end() ? -1 : static_cast<int>(it - members.begin());
}

}  // namespace

size_t ShmWindowSegment::SegmentBytes(uint32_t first) {
  return RegionOffset(kSharedWindowContexts, first);
}

void ShmWindowSegment::Initialize(void* segment, uint32_t first) {
  auto* h = new (segment) Header();
  h->bytes = SegmentBytes(first);
  for (uint32_t c = first; c < kSharedWindowContexts; ++c) new (Line(segment, c)) ShmWindowLine();
}

Status ShmWindowSegment::Check(const void* segment, const std::string& name, uint32_t first) {
  const auto* h = static_cast<const Header*>(segment);
  if (h->magic != kMagic || h->version != kVersion || h->bytes != SegmentBytes(first)) {
    return UnavailableError("shared-memory segment " + name +
                            " is not a window segment of this Hora version");
  }
  return Status::Ok();
}

void ShmWindowSegment::MarkClosed(void* segment) {
  static_cast<Header*>(segment)->closed.store(1, std::memory_order_release);
}

bool ShmWindowSegment::Closed(const void* segment) {
  return static_cast<const Header*>(segment)->closed.load(std::memory_order_acquire) != 0;
}

void ShmWindowSegment::Beat(void* segment) {
  static_cast<Header*>(segment)->heartbeat.fetch_add(1, std::memory_order_relaxed);
}

uint64_t ShmWindowSegment::Heartbeat(const void* segment) {
  return static_cast<const Header*>(segment)->heartbeat.load(std::memory_order_relaxed);
}

ShmWindowLine* ShmWindowSegment::Line(void* segment, uint32_t context) {
  return reinterpret_cast<ShmWindowLine*>(static_cast<std::byte*>(segment) + 64 * (1 + context));
}

std::byte* ShmWindowSegment::Region(void* segment, uint32_t context, uint32_t first) {
  return static_cast<std::byte*>(segment) + RegionOffset(context, first);
}

ShmWindow::ShmWindow(ShmTransport& transport, uint32_t context, const std::vector<void*>& segments,
                     std::vector<int> members, uint32_t first)
    : SharedWindow(WindowRank(transport, members),
                   members.empty() ? transport.size() : static_cast<int>(members.size())),
      transport_(transport),
      members_(std::move(members)),
      context_(context),
      bytes_(SharedWindowBytes(context)) {
  for (void* s : segments) {
    lines_.push_back(ShmWindowSegment::Line(s, context));
    regions_.push_back(ShmWindowSegment::Region(s, context, first));
  }
}

std::string ShmWindow::Missing() const {
  std::string list;
  int count = 0;
  for (int k = 0; k < size(); ++k) {
    if (lines_[static_cast<size_t>(k)]->step.load(std::memory_order_acquire) >= step_) continue;
    // (Named as the job numbers its ranks: "rank 5".)
    list += (list.empty() ? "" : ", ") + transport_.Name(Member(static_cast<size_t>(k))).substr(5);
    ++count;
  }
  return (count == 1 ? "rank " : "ranks ") + list;
}

bool ShmWindow::PeerAhead() const {
  for (const ShmWindowLine* line : lines_) {
    if (line->step.load(std::memory_order_acquire) > step_) return true;
  }
  return false;
}

void ShmWindow::Publish(uint64_t word) {
  const uint64_t step = ++step_;
  first_ = 0;
  ShmWindowLine& mine = *lines_[static_cast<size_t>(rank())];
  mine.word[step & 1u].store(word, std::memory_order_relaxed);
  // Only the step's last arrival wakes the sleepers: an earlier one would
  // only wake them to find the step still open (a context switch each, per
  // arrival). The store and the first look are seq_cst: of the last two
  // ranks to arrive, at least one sees the other, and rings.
  mine.step.store(step, std::memory_order_seq_cst);
  if (Arrived(std::memory_order_seq_cst)) transport_.RingPeers(members_);
}

bool ShmWindow::Arrived(std::memory_order order) {
  for (; first_ < lines_.size(); ++first_) {
    if (lines_[first_]->step.load(order) < step_) return false;
  }
  return true;
}

Status ShmWindow::WaitStep(TimePoint deadline) {
  if (Arrived()) return Status::Ok();
  // As ShmTransport::WaitUntil: the clock only every kClockEvery polls.
  constexpr uint32_t kClockEvery = 64;
  TimePoint spin_until = Clock::now() + transport_.spin();
  // Where ranks outnumber cores, every look that finds the step open yields
  // the core: the rank waited for may be queued on it (a run of pauses held
  // it for microseconds; np 4 on 2 cores, 4 B: 10.6-11.4 us -> 4.1-4.5).
  const bool yield = transport_.yield();
  for (uint32_t round = 1;; ++round) {
    if (Arrived()) return Status::Ok();
    if (round % kClockEvery != 0) {
      if (yield) {
        std::this_thread::yield();
      } else {
        CpuRelax();
      }
      continue;
    }
    const TimePoint now = Clock::now();
    if (now >= deadline) {
      return TimeoutError("waiting for " + Missing() + " at step " + std::to_string(step_) +
                          " of the shared-memory window (context " + std::to_string(context_) +
                          ")");
    }
    if (now < spin_until) {
      if (transport_.yield()) {
        std::this_thread::yield();
      } else {
        CpuRelax();
      }
      continue;
    }
    ShmDoorbell& bell = transport_.own_bell();
    const uint32_t seen = bell.PrepareSleep();
    if (!Arrived()) bell.Sleep(seen, std::min<Duration>(deadline - Clock::now(), kShmMaxSleep));
    bell.FinishSleep();
    if (Arrived()) return Status::Ok();
    for (size_t k = first_; k < lines_.size(); ++k) {
      if (lines_[k]->step.load(std::memory_order_acquire) >= step_) continue;
      Status gone = transport_.PeerGone(Member(k));
      if (!gone.ok()) return gone;  // (it names the rank: the step adds nothing a user needs)
    }
    spin_until = Clock::now() + transport_.spin();
  }
}

}  // namespace hora
