// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// One direction of one pair of ranks: a single-producer/single-consumer ring
// of fixed-size slots laid out in a shared-memory segment that both ranks
// map (possibly at different addresses, in different processes).
//
// Layout (offsets from the segment start):
//   0     tail  — slots published so far (written by the producer only)
//   64    head  — slots consumed so far (written by the consumer only)
//   128   magic, version, geometry, broken flag (set once by the producer)
//   192   kShmSlotCount slot descriptors {tag, message bytes, slot bytes, flags}
//   4096  kShmSlotCount payloads of kShmSlotBytes, each 64-byte aligned
// tail and head are 64-bit lock-free (hence address-free) atomics on their
// own cache lines; a slot's descriptor and payload are written before tail
// is advanced (release) and read after tail is observed (acquire), and the
// consumer frees a slot by advancing head (release) after it is done with it.
//
// Framing: a message is one or more consecutive slots; the first carries
// kShmFirstSlot, every slot carries the message's tag and total size, and
// each slot holds min(kShmSlotBytes, remaining) bytes of payload (a message
// of 0 bytes takes one empty slot). Because kShmSlotBytes is a multiple of 64,
// every slot but the last holds whole elements of any data type, so the
// receiver can reduce straight out of a slot.
//
// Thread-safety: one producer thread and one consumer thread, each using only
// its half of the methods.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
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
// Why a producer marked its channel broken (ShmChannel::broken()).
inline constexpr uint32_t kShmBrokenCancelled = 1;  // a partly written message was cancelled
inline constexpr uint32_t kShmBrokenClosed = 2;     // the producer's transport was destroyed
static_assert(kShmSlotBytes % 64 == 0, "slots must hold whole elements of every type");

struct ShmSlotDesc {
  uint64_t tag;
  uint64_t message_bytes;  // size of the whole message
  uint32_t bytes;          // payload bytes in this slot
  uint32_t flags;          // kShmFirstSlot
};

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
  // Producer: payload of the next free slot (only when CanWrite()).
  std::byte* WritePayload();
  // Producer: publishes the slot filled through WritePayload().
  void Publish(uint64_t tag, uint64_t message_bytes, uint32_t bytes, uint32_t flags);
  // Producer: tells the consumer that nothing more will be published
  // (`reason` is kShmBrokenCancelled or kShmBrokenClosed). Sticky; the first
  // reason stays.
  void MarkBroken(uint32_t reason);

  // Consumer: the oldest published slot not yet released, or nullptr.
  const ShmSlotDesc* Peek();
  // Consumer: payload of the slot Peek() returned.
  const std::byte* ReadPayload() const;
  // Consumer: frees the slot Peek() returned.
  void Release();
  // Consumer: the producer's MarkBroken() reason, or 0. Slots published
  // before it stay readable: call Peek() again after seeing a reason.
  uint32_t broken() const;

 private:
  struct Header;
  Header* header_ = nullptr;
  std::byte* payload_ = nullptr;
  uint64_t cached_tail_ = 0;  // consumer's last view of tail
  uint64_t cached_head_ = 0;  // producer's last view of head
  uint64_t next_ = 0;         // producer: next slot to publish; consumer: next to read
};

}  // namespace hora
