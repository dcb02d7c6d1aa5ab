// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "transport/shm/shm_channel.h"

#include <cstring>
#include <new>

namespace hora {

namespace {
constexpr uint32_t kMagic = 0x68736863;  // "chsh"
constexpr uint32_t kVersion = 3;         // 3: direct (single-copy) messages
constexpr size_t kPayloadOffset = 4096;
}  // namespace

struct ShmChannel::Header {
  alignas(64) std::atomic<uint64_t> head{0};
  alignas(64) uint32_t magic = kMagic;
  uint32_t version = kVersion;
  uint32_t slot_count = kShmSlotCount;
  uint32_t slot_bytes = kShmSlotBytes;
  std::atomic<uint32_t> broken{0};
  ShmSlotDesc slots[kShmSlotCount];
};

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared counters must be lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared flags must be lock-free");

size_t ShmChannel::SegmentBytes() { return kPayloadOffset + kShmSlotCount * kShmSlotBytes; }

void ShmChannel::Initialize(void* segment) {
  static_assert(sizeof(Header) <= kPayloadOffset, "channel header overlaps the payloads");
  new (segment) Header();
}

Status ShmChannel::Check(const void* segment, const std::string& name) {
  const auto* h = static_cast<const Header*>(segment);
  if (h->magic != kMagic || h->version != kVersion || h->slot_count != kShmSlotCount ||
      h->slot_bytes != kShmSlotBytes) {
    return UnavailableError("shared-memory segment " + name +
                            " is not a channel of this Hora version (magic, version or geometry "
                            "differ)");
  }
  return Status::Ok();
}

ShmChannel::ShmChannel(void* segment)
    : header_(static_cast<Header*>(segment)),
      payload_(static_cast<std::byte*>(segment) + kPayloadOffset) {}

bool ShmChannel::CanWrite() {
  if (next_ - cached_head_ < kShmSlotCount) return true;
  cached_head_ = header_->head.load(std::memory_order_acquire);
  return next_ - cached_head_ < kShmSlotCount;
}

bool ShmChannel::Released(uint64_t published) {
  if (cached_head_ >= published) return true;
  cached_head_ = header_->head.load(std::memory_order_acquire);
  return cached_head_ >= published;
}

namespace {

// A direct slot's inline payload: the address, then the claim word.
std::atomic_ref<uint32_t> Claim(ShmSlotDesc& d) {
  static_assert(std::atomic_ref<uint32_t>::is_always_lock_free, "claims are shared");
  return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(d.inline_payload + 8));
}

}  // namespace

void ShmChannel::PublishDirect(uint64_t tag, uint64_t message_bytes, uint64_t address) {
  ShmSlotDesc& d = header_->slots[next_ % kShmSlotCount];
  std::memcpy(d.inline_payload, &address, sizeof(address));
  Claim(d).store(kShmClaimOpen, std::memory_order_relaxed);  // published below, with release
  Publish(tag, message_bytes, kShmDirectBytes, kShmFirstSlot | kShmDirect);
}

bool ShmChannel::Withdraw(uint64_t published) {
  uint32_t open = kShmClaimOpen;
  return Claim(header_->slots[(published - 1) % kShmSlotCount])
      .compare_exchange_strong(open, kShmClaimWithdrawn, std::memory_order_acq_rel);
}

bool ShmChannel::DirectFailed(uint64_t published) {
  return Claim(header_->slots[(published - 1) % kShmSlotCount]).load(std::memory_order_acquire) ==
         kShmClaimFailed;
}

bool ShmChannel::DirectClaimed(uint64_t published) {
  return Claim(header_->slots[(published - 1) % kShmSlotCount]).load(std::memory_order_acquire) ==
         kShmClaimReading;
}

bool ShmChannel::DirectDeclined(uint64_t published) {
  return Claim(header_->slots[(published - 1) % kShmSlotCount]).load(std::memory_order_acquire) ==
         kShmClaimDeclined;
}

bool ShmChannel::DeclineDirect() {
  uint32_t open = kShmClaimOpen;
  return Claim(header_->slots[next_ % kShmSlotCount])
      .compare_exchange_strong(open, kShmClaimDeclined, std::memory_order_acq_rel);
}

void ShmChannel::FailDirect() {
  Claim(header_->slots[next_ % kShmSlotCount]).store(kShmClaimFailed, std::memory_order_release);
}

uint32_t ShmChannel::BrokenAfterDirectRead() {
  Claim(header_->slots[next_ % kShmSlotCount])
      .exchange(kShmClaimReading, std::memory_order_acq_rel);
  return broken();
}

std::optional<uint64_t> ShmChannel::ClaimDirect() {
  ShmSlotDesc& d = header_->slots[next_ % kShmSlotCount];
  uint32_t open = kShmClaimOpen;
  if (!Claim(d).compare_exchange_strong(open, kShmClaimReading, std::memory_order_acq_rel)) {
    return std::nullopt;
  }
  uint64_t address = 0;
  std::memcpy(&address, d.inline_payload, sizeof(address));
  return address;
}

std::byte* ShmChannel::WritePayload(uint32_t bytes) {
  if (bytes <= kShmInlineBytes) return header_->slots[next_ % kShmSlotCount].inline_payload;
  return payload_ + (next_ % kShmSlotCount) * kShmSlotBytes;
}

void ShmChannel::Publish(uint64_t tag, uint64_t message_bytes, uint32_t bytes, uint32_t flags) {
  ShmSlotDesc& d = header_->slots[next_ % kShmSlotCount];
  d.tag = tag;
  d.message_bytes = message_bytes;
  d.bytes = bytes;
  d.flags = flags;
  ++next_;
  d.sequence.store(next_, std::memory_order_release);
}

void ShmChannel::MarkBroken(uint32_t reason) {
  uint32_t none = 0;
  header_->broken.compare_exchange_strong(none, reason, std::memory_order_acq_rel);
}

std::optional<ShmSlotInfo> ShmChannel::Peek() {
  const ShmSlotDesc& d = header_->slots[next_ % kShmSlotCount];
  if (d.sequence.load(std::memory_order_acquire) != next_ + 1) return std::nullopt;
  return ShmSlotInfo{d.tag, d.message_bytes, d.bytes, d.flags};
}

const std::byte* ShmChannel::ReadPayload(uint32_t bytes) const {
  const ShmSlotDesc& d = header_->slots[next_ % kShmSlotCount];
  if (bytes <= kShmInlineBytes) return d.inline_payload;
  return payload_ + (next_ % kShmSlotCount) * kShmSlotBytes;
}

void ShmChannel::Release() {
  ++next_;
  header_->head.store(next_, std::memory_order_release);
}

uint32_t ShmChannel::broken() const { return header_->broken.load(std::memory_order_acquire); }

}  // namespace hora
