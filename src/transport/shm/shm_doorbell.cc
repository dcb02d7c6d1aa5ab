// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/shm/shm_doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <ctime>
#include <new>

namespace hora {

namespace {
constexpr uint32_t kMagic = 0x6c6c6562;  // "bell"
}  // namespace

struct ShmDoorbell::Word {
  alignas(64) std::atomic<uint32_t> seq{0};  // bumped by a waker that saw a sleeper
  std::atomic<uint32_t> sleepers{0};         // the owner sleeps or is about to
  uint32_t magic = kMagic;
};

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex words are 32-bit");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared words must be lock-free");

void ShmDoorbell::Initialize(void* segment) {
  static_assert(sizeof(Word) <= kSegmentBytes);
  new (segment) Word();
}

Status ShmDoorbell::Check(const void* segment, const std::string& name) {
  if (static_cast<const Word*>(segment)->magic != kMagic) {
    return UnavailableError("shared-memory segment " + name + " is not a Hora doorbell");
  }
  return Status::Ok();
}

ShmDoorbell::ShmDoorbell(void* segment) : word_(static_cast<Word*>(segment)) {}

void ShmDoorbell::Ring() {
  if (word_->sleepers.fetch_add(0, std::memory_order_acq_rel) == 0) return;
  word_->seq.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word_->seq), FUTEX_WAKE, INT_MAX, nullptr,
          nullptr, 0);
}

uint32_t ShmDoorbell::PrepareSleep() {
  word_->sleepers.fetch_add(1, std::memory_order_acq_rel);
  return word_->seq.load(std::memory_order_acquire);
}

void ShmDoorbell::Sleep(uint32_t seen, Duration bound) {
  if (bound <= Duration::zero()) return;
  const auto ns = bound.count();
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(ns / 1000000000);
  ts.tv_nsec = static_cast<long>(ns % 1000000000);
  // Returns at once when seq != seen (EAGAIN), on a wake, a signal or the
  // timeout; all are fine since the caller looks again.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word_->seq), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void ShmDoorbell::FinishSleep() { word_->sleepers.fetch_sub(1, std::memory_order_release); }

}  // namespace hora
