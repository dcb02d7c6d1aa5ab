// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The receiving side of the shm transport: consuming a peer's ring into
// posted receives (copying, or reducing straight from the slots), setting
// aside messages nobody asked for yet, and failing receives on a broken
// channel (contracts in shm_transport.h).
#include <algorithm>
#include <cstring>

#include "common/units.h"
#include "transport/shm/shm_direct.h"
#include "transport/shm/shm_transport.h"
#include "transport/shm/shm_transport_impl.h"
#include "transport/tag_layout.h"

namespace hora {
namespace {

using Sink = ShmTransport::Link::Sink;

}  // namespace

bool ShmTransport::ProgressRecvs(int peer, Link& l) {
  auto from = [&] {  // only built on errors: this is the hot path
    return Name(peer) + "'s shared-memory channel to " + Name(rank_);
  };
  bool moved = false;
  while (l.in_broken.empty()) {
    std::optional<ShmSlotInfo> slot = l.in.Peek();
    if (!slot) {
      const uint32_t reason = l.in.broken();
      if (reason == 0) return moved;
      slot = l.in.Peek();  // slots published before the flag are visible now
      if (!slot) {
        BreakInbound(l, from() + (reason == kShmBrokenClosed
                                      ? " was closed (" + Name(peer) + " closed its session)"
                                      : " is unusable (" + Name(peer) +
                                            " cancelled a message it had partly written)"));
        return true;
      }
    }
    const ShmSlotInfo d = *slot;
    const bool first = (d.flags & kShmFirstSlot) != 0;
    Link::Current& c = l.current;
    const bool direct = (d.flags & kShmDirect) != 0;
    std::optional<uint64_t> address;  // a direct message's, once claimed
    if (c.sink == Sink::kNone) {
      if (!first) {
        BreakInbound(l, from() + " is corrupt (a message does not start with its first slot)");
        return true;
      }
      if (direct) {
        if (d.bytes != kShmDirectBytes) {
          BreakInbound(l, from() + " is corrupt (a direct message's slot holds " +
                              std::to_string(d.bytes) + " bytes)");
          return true;
        }
        if (l.posted.empty()) return moved;  // nobody asked yet: leave it in the ring
        auto it = FindTag(l.posted, d.tag);
        if (it != l.posted.end() && it->reduce && it->bytes == d.message_bytes) {
          // Folded in, it is read no faster from the sender (into a buffer
          // first) than from the slots, and keeps the sender waiting: ask
          // for it through the slots. (Withdrawn meanwhile: skipped alike.)
          (void)l.in.DeclineDirect();
          l.in.Release();
          l.bell.Ring();
          moved = true;
          continue;
        }
        address = l.in.ClaimDirect();
        if (!address) {  // its sender gave it up before it was read: never delivered
          l.in.Release();
          l.bell.Ring();
          moved = true;
          continue;
        }
      }
      if (!StartMessage(peer, l, d)) return moved;  // nobody asked yet: leave it in the ring
    } else if (first || d.tag != c.tag || d.message_bytes != c.bytes) {
      BreakInbound(l, from() + " is corrupt (a message was interrupted by another)");
      return true;
    }
    if (direct) {
      if (!ReadDirect(peer, l, *address)) return true;
      l.in.Release();
      l.bell.Ring();  // the sender's request completes now
      moved = true;
      FinishMessage(peer, l);
      continue;
    }
    if (d.bytes != std::min(kShmSlotBytes, c.bytes - c.received)) {
      BreakInbound(l, from() + " is corrupt (slot of " + std::to_string(d.bytes) +
                          " bytes at offset " + std::to_string(c.received) + " of a " +
                          std::to_string(c.bytes) + "-byte message)");
      return true;
    }
    if (c.sink == Sink::kRecv) {
      Deliver(c.recv, c.received, l.in.ReadPayload(d.bytes), d.bytes);  // straight from the slot
    } else if (c.sink == Sink::kUnexpected && d.bytes > 0) {
      std::memcpy(c.buffer.data.get() + c.received, l.in.ReadPayload(d.bytes), d.bytes);
    }
    c.received += d.bytes;
    l.in.Release();
    l.bell.Ring();
    moved = true;
    if (c.received == c.bytes) FinishMessage(peer, l);
  }
  return moved;
}

bool ShmTransport::ReadDirect(int peer, Link& l, uint64_t address) {
  Link::Current& c = l.current;
  Status st;
  if (c.sink == Sink::kUnexpected) {
    st = ReadFromProcess(l.peer_pid, address, c.buffer.data.get(), c.bytes);
  } else if (c.sink == Sink::kRecv && !c.recv.reduce) {
    st = ReadFromProcess(l.peer_pid, address, c.recv.data, c.bytes);
  } else if (c.sink == Sink::kRecv) {  // (never: a receive that folds declines them)
    st = InternalError("a receive that folds took a direct message");
  }
  // A sender that gives up a message this rank had claimed marks the
  // channel before its buffer may go: seen here (after the reads), what was
  // read may be torn, or the read failed because the buffer had gone. A
  // process that ended meanwhile may have left its pid to another.
  if (l.in.BrokenAfterDirectRead() != 0) {
    st = UnavailableError(Name(peer) + " gave the message up (cancelled it, or closed its " +
                          "session) before it was read whole");
  } else if (st.ok() && ProcessEnded(l)) {
    st = UnavailableError(Name(peer) + "'s process ended while the message was read");
  }
  if (!st.ok()) {
    l.in.FailDirect();  // its sender's request fails now rather than time out
    BreakInbound(l, Name(peer) + "'s shared-memory channel to " + Name(rank_) +
                        " is unusable (a message of " + ExactBytes(c.bytes) + ", " +
                        tag_layout::Describe(c.tag) +
                        ", read directly from its memory: " + st.message() + ")");
    return false;
  }
  c.received = c.bytes;
  return true;
}

bool ShmTransport::StartMessage(int peer, Link& l, const ShmSlotInfo& first) {
  auto it = FindTag(l.posted, first.tag);
  if (it == l.posted.end() && l.posted.empty()) return false;
  Link::Current& c = l.current;
  c.tag = first.tag;
  c.bytes = first.message_bytes;
  c.received = 0;
  if (it == l.posted.end()) {
    // A receive for another tag is waiting behind this message: set it aside.
    c.sink = Sink::kUnexpected;
    c.buffer = pool_.Take(c.bytes);
    return true;
  }
  c.recv = std::move(*it);
  l.posted.erase(it);
  c.sink = Sink::kRecv;
  if (c.recv.bytes != c.bytes) {
    c.recv.request->Complete(InvalidArgument(MismatchMessage(peer, c.tag, c.bytes, c.recv.bytes)));
    c.recv = {};
    c.sink = Sink::kDiscard;
  }
  return true;
}

void ShmTransport::FinishMessage(int peer, Link& l) {
  Link::Current c = std::move(l.current);
  l.current = {};
  if (c.sink == Sink::kRecv) {
    c.recv.request->Complete(Status::Ok());
  } else if (c.sink == Sink::kUnexpected) {
    auto it = FindTag(l.posted, c.tag);  // posted while the message was being set aside?
    if (it == l.posted.end()) {
      l.unexpected.push_back({c.tag, c.bytes, std::move(c.buffer)});
      return;
    }
    Link::Recv r = std::move(*it);
    l.posted.erase(it);
    if (r.bytes != c.bytes) {
      r.request->Complete(InvalidArgument(MismatchMessage(peer, c.tag, c.bytes, r.bytes)));
    } else {
      Deliver(r, 0, c.buffer.data.get(), c.bytes);
      r.request->Complete(Status::Ok());
    }
    pool_.Give(std::move(c.buffer));
  }
}

void ShmTransport::BreakInbound(Link& l, const std::string& why) {
  l.in_broken = why;
  const Status st = UnavailableError(why);
  if (l.current.sink == Sink::kRecv) l.current.recv.request->Complete(st);
  l.current = {};
  for (auto& r : l.posted) r.request->Complete(st);
  l.posted.clear();
}

void ShmTransport::Deliver(const Link::Recv& recv, size_t offset, const std::byte* src,
                           size_t bytes) {
  if (bytes == 0) return;
  if (recv.reduce) {
    // Offsets are multiples of kShmSlotBytes, so elements are whole.
    const ReduceSpec& r = *recv.reduce;
    r.reduce(r.dtype, r.op, recv.data + offset, src, bytes / DataTypeSize(r.dtype));
  } else {
    std::memcpy(recv.data + offset, src, bytes);
  }
}

std::string ShmTransport::MismatchMessage(int peer, Tag tag, size_t sent, size_t expected) const {
  return "message size mismatch: rank " + std::to_string(peer) + " sent " + ExactBytes(sent) +
         " but rank " + std::to_string(rank_) + " expected " + ExactBytes(expected) + " (" +
         tag_layout::Describe(tag) + ")";
}

}  // namespace hora
