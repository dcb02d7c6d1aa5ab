// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// One direction of one pair of ranks: a single-producer/single-consumer ring
// of fixed-size slots laid out in a shared-memory segment that both ranks
// map (possibly at different addresses, in different processes).
//
// Layout (offsets from the segment start):
//   0     head  — slots consumed so far (written by the consumer only)
//   64    magic, version, geometry, broken flag (set once by the producer)
//   128   kShmSlotCount slot descriptors, one cache line each:
//         {sequence, tag, message bytes, slot bytes, flags, 32 inline bytes}
//   4096  kShmSlotCount payloads of kShmSlotBytes, each 64-byte aligned
// A slot's sequence number (1 for the first message slot ever, 2 for the
// next, ...) is stored last, with release, after its descriptor and
// payload; the consumer polls the sequence of the slot it expects next
// (acquire), so a small message costs the consumer one cache line: payloads
// of up to kShmInlineBytes travel inside the descriptor. The consumer frees
// a slot by advancing head (release) after it is done with it; the producer
// reads head only when the ring looks full.
// Framing: a message is one or more consecutive slots; the first carries
// kShmFirstSlot, every slot carries the message's tag and total size, and
// each slot holds min(kShmSlotBytes, remaining) bytes of payload (a message
// of 0 bytes takes one empty slot); or, read by the receiver from the
// sender's memory, one slot with kShmFirstSlot | kShmDirect that holds
// where (kShmDirectBytes, below). Because kShmSlotBytes is a multiple of 64,
// every slot but the last holds whole elements of any data type, so the
// receiver can reduce straight out of a slot.
//
// Thread-safety: one producer thread and one consumer thread, each using only
// its half of the methods.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "hora/status.h"

namespace hora {

// Geometry of every channel: 8 slots of 256 KiB (2 MiB + 4 KiB per ordered
// pair). A message of at most one slot is sent eagerly in one step; the
// default ring segment of the collectives (HORA_RING_SEGMENT_BYTES, 256 KiB)
// is exactly one slot.
inline constexpr size_t kShmSlotCount = 8;
inline constexpr size_t kShmSlotBytes = 256 * 1024;
inline constexpr uint32_t kShmFirstSlot = 1;
// A message the receiver reads straight from the sender's memory: its one
// slot carries, inline (kShmDirectBytes), the sender's address and a claim
// word; the sender's request completes once the receiver released that
// slot (shm_transport.h, "single copy"). The receiver claims the message
// before it reads (open -> reading); a sender that gives the message up
// withdraws it instead (open -> withdrawn), and the receiver then skips
// it: whichever comes first wins.
inline constexpr uint32_t kShmDirect = 2;
inline constexpr uint32_t kShmDirectBytes = 16;
inline constexpr uint32_t kShmClaimOpen = 0;
inline constexpr uint32_t kShmClaimReading = 1;
inline constexpr uint32_t kShmClaimWithdrawn = 2;
inline constexpr uint32_t kShmClaimFailed = 3;  // the receiver's read failed; never released
// The receiver will not read it (it folds it into a receive: that is no
// faster read than through the slots) and released the slot: the sender
// sends the same message again through the slots, next.
inline constexpr uint32_t kShmClaimDeclined = 4;
// Why a producer marked its channel broken (ShmChannel::broken()).
inline constexpr uint32_t kShmBrokenCancelled = 1;  // a partly written message was cancelled
inline constexpr uint32_t kShmBrokenClosed = 2;     // the producer's transport was destroyed
static_assert(kShmSlotBytes % 64 == 0, "slots must hold whole elements of every type");

// What the consumer reads of a slot (copied once, so that the checks and
// the use see the same values).
struct ShmSlotInfo {
  uint64_t tag;
  uint64_t message_bytes;  // size of the whole message
  uint32_t bytes;          // payload bytes in this slot
  uint32_t flags;          // kShmFirstSlot, kShmDirect
};

// Payloads of at most this many bytes travel inside the slot descriptor.
inline constexpr size_t kShmInlineBytes = 32;

struct alignas(64) ShmSlotDesc {
  std::atomic<uint64_t> sequence{0};  // 1 + index of the slot's publication; 0 = never
  uint64_t tag = 0;
  uint64_t message_bytes = 0;  // size of the whole message
  uint32_t bytes = 0;          // payload bytes in this slot
  uint32_t flags = 0;          // kShmFirstSlot, kShmDirect
  alignas(32) std::byte inline_payload[kShmInlineBytes] = {};
};
static_assert(sizeof(ShmSlotDesc) == 64, "a slot descriptor is one cache line");

class ShmChannel {
 public:
  // Bytes of the segment that holds one channel.
  static size_t SegmentBytes();
  // Lays out an empty channel in a freshly created (zeroed) segment.
  static void Initialize(void* segment);
  // Checks magic and geometry of a mapped channel; `name` is for messages.
  static Status Check(const void* segment, const std::string& name);

  ShmChannel() = default;
  explicit ShmChannel(void* segment);

  // Producer: a free slot exists.
  bool CanWrite();
  // Producer: where the next free slot's `bytes` bytes of payload go (only
  // when CanWrite()); Publish() must then be given the same `bytes`.
  std::byte* WritePayload(uint32_t bytes);
  // Producer: publishes the slot filled through WritePayload().
  void Publish(uint64_t tag, uint64_t message_bytes, uint32_t bytes, uint32_t flags);
  // Producer: how many slots it has published so far; once Released(n) of
  // that count, the consumer is done with every one of them.
  uint64_t published() const { return next_; }
  bool Released(uint64_t published);
  // Producer: publishes a direct message (one slot, open to its claim) of
  // `message_bytes` at `address` in this process (only when CanWrite()).
  void PublishDirect(uint64_t tag, uint64_t message_bytes, uint64_t address);
  // Producer: withdraws the direct message that was the `published`-th slot
  // (published() after its PublishDirect), not yet released: true where the
  // consumer had not claimed it (it will skip it), false where it had (it
  // reads or has read it).
  bool Withdraw(uint64_t published);
  // Producer: whether the consumer's read of that message failed (it broke
  // the channel and will never release the slot), or it declined it.
  bool DirectFailed(uint64_t published);
  bool DirectDeclined(uint64_t published);
  // Producer: whether the consumer claimed that message (it reads it now,
  // or has read it).
  bool DirectClaimed(uint64_t published);
  // Producer: tells the consumer that nothing more will be published
  // (`reason` is kShmBrokenCancelled or kShmBrokenClosed). Sticky; the first
  // reason stays.
  void MarkBroken(uint32_t reason);

  // Consumer: the oldest published slot not yet released, if any.
  std::optional<ShmSlotInfo> Peek();
  // Consumer: payload of the slot Peek() returned (`bytes` as Peek() said).
  const std::byte* ReadPayload(uint32_t bytes) const;
  // Consumer: claims the direct message Peek() returned and gives the
  // sender's address, or nothing where its sender withdrew it (then only
  // Release() it).
  std::optional<uint64_t> ClaimDirect();
  // Consumer: tells the sender that reading the claimed message failed.
  void FailDirect();
  // Consumer: declines the direct message Peek() returned (then Release()
  // it; it comes again through the slots), or false where its sender
  // withdrew it.
  bool DeclineDirect();
  // Consumer: broken(), ordered after this thread's reads of the claimed
  // message's bytes (an acquire-release exchange on its claim in between:
  // a plain load could be answered before them).
  uint32_t BrokenAfterDirectRead();
  // Consumer: frees the slot Peek() returned.
  void Release();
  // Consumer: the producer's MarkBroken() reason, or 0. Slots published
  // before it stay readable: call Peek() again after seeing a reason.
  uint32_t broken() const;

 private:
  struct Header;
  Header* header_ = nullptr;
  std::byte* payload_ = nullptr;
  uint64_t cached_head_ = 0;  // producer's last view of head
  uint64_t next_ = 0;         // producer: next slot to publish; consumer: next to read
};

}  // namespace hora
