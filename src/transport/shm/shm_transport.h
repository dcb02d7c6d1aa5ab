// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Shared-memory transport for the ranks of one host (threads or processes).
//
// Channels: every ordered pair of ranks (src -> dst) has a ring of
// kShmSlotCount slots of kShmSlotBytes in a POSIX shared-memory segment
// "/hora-<job_id>-<src>-<dst>" (shm_channel.h); every rank has a doorbell
// segment "/hora-<job_id>-bell-<rank>" that it sleeps on (shm_doorbell.h).
// Segments are created 0600 and exclusive, and unlinked as soon as every
// peer has mapped them, so nothing is left under /dev/shm even when a process
// is killed later; the destructor unlinks whatever rendezvous did not (an
// error path). Only a crash during rendezvous can leave segments behind:
// RemoveShmSegments(job_id) (shm_segment.h) removes them.
//
// Data path:
//  - A send copies its bytes into the ring slot by slot and completes when
//    its last byte is in the ring (a message of at most one slot is eager:
//    Isend itself usually completes it). Messages of a pair stay in order.
//  - Single copy (ShmOptions::single_copy_bytes): a send at least that large,
//    or an IsendInPlace (ShmOptions::single_copy_on_request), to a peer that
//    can read this process (probed at the rendezvous) publishes one slot
//    holding its address instead; the receiver reads the
//    bytes from this process (shm_direct.h) and releases the slot, which
//    completes the send. Such a send waits for its receive. An IrecvReduce
//    declines it, and the sender sends it again through the slots; a
//    sender that gives it up unread withdraws it (shm_channel.h).
//  - A receive takes the message at the head of its peer's ring when the tag
//    matches, copying it out of the slots, or, for IrecvReduce, reducing
//    straight from the mapped slots into the destination (no staging copy).
//  - While a receive from a peer is posted and the ring's head message has a
//    tag nobody asked for, that message is copied into an unexpected-message
//    queue, so receives may be posted in any tag order; a later receive for
//    it is served from the queue.
//
// Progress has no thread of its own: it happens inside Wait() (which drives
// every pending send and receive of this rank, on all channels), Isend and
// Irecv. Wait polls for a while (the `spin` given at creation), pausing the
// CPU between polls, or yielding it after every poll where the ranks outnumber
// the cores this process may run on; then it sleeps on the doorbell futex for at most kShmMaxSleep
// at a time, always honouring the deadline. Requests must therefore be waited on through
// Transport::Wait: RequestState::Wait alone makes no progress.
//
// Where this differs from the seam (transport.h); the size-mismatch case is
// the one deviation the seam does not already allow:
//  - A send through the slots completes once its bytes are in the ring,
//    before the receive may be posted.
//  - A size mismatch fails the receive (naming both sizes, the peer and the
//    tag) and discards the message; the sender cannot learn of it and its
//    request completes OK.
//  - Cancelling a receive whose message is half consumed discards the rest
//    of that message; the channel stays usable. Cancelling a send that is
//    partly in the ring (or a single-copy send whose slot is published)
//    breaks the channel to that peer for good: the
//    receiver fails the receive (and later ones) with an error saying so,
//    and later sends to that peer fail, rather than delivering corrupt data.
//  - Destroying a transport completes its pending requests (Aborted) and
//    marks its outgoing channels closed: a peer still receives the messages
//    already in the ring, then its receives from this rank fail at once.
//
// Thread-safety: several threads of a rank may use its transport at once
// (a Session's caller and its engine thread, each with its own tags); one
// lock guards the rank's side, and a thread that finds another progressing
// lets it. Destruction is single-threaded.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "store/store.h"
#include "transport/shm/shm_channel.h"
#include "transport/shm/shm_segment.h"
#include "transport/transport.h"

namespace hora {

// CreateShmTransport's default poll before a sleep (sessions pass
// Config::wait_spin_us), and the longest single sleep.
inline constexpr Duration kShmSpin = std::chrono::microseconds(20);
inline constexpr Duration kShmMaxSleep = std::chrono::milliseconds(50);
// How often a waiter that slept checks that its peers' processes still exist.
inline constexpr Duration kShmLivenessEvery = std::chrono::milliseconds(10);
// How long cancelling a single-copy send its receiver is reading waits for
// the read to end before it breaks the channel instead.
inline constexpr Duration kShmClaimedReadWait = std::chrono::seconds(1);

// Every rank of the group calls this with the same `size`, `job_id` and a
// Store shared by all of them. Rank r creates its doorbell and its outgoing
// channels, publishes their names under "<job_id>/shm/names/<r>", maps its
// peers' segments, announces "<job_id>/shm/mapped/<r>", waits for every
// peer's announcement and unlinks its own segments. Fails (naming the rank
// it waited for) if that takes longer than `timeout`. `job_id` must be unique
// among the shm transports that exist at the same time on the host and among
// groups that share the store. `spin`: how long Wait polls before it sleeps
// (Config::wait_spin_us).
//
// Liveness: a thread of the transport's own bumps a heartbeat counter in
// this rank's window segment every fifth of `peer_timeout` (at least every
// second) and looks at the peers: one whose process ended without closing
// its transport is lost at once, and, where `peer_timeout` is nonzero, one
// whose heartbeat did not move for that long (stopped, frozen) is lost then.
// A lost peer fails every pending and later request, naming it; ranks as
// threads of one process are never lost by heartbeat.
struct ShmOptions {
  Duration timeout = std::chrono::seconds(30);  // of the rendezvous
  Duration spin = kShmSpin;
  Duration peer_timeout{};  // zero: a silent heartbeat is no loss
  // The job's rank of each rank of the group, for messages (empty: the
  // group is the job).
  std::vector<int> job_ranks;
  // Messages of at least this many bytes travel in a single copy, read by
  // the receiver from the sender's memory, between the pairs where the
  // kernel allows it (probed at the rendezvous); 0: never. Sessions pass
  // ShmSingleCopyBytes(Config::shm_single_copy_bytes, ...).
  size_t single_copy_bytes = 0;
  // Sends that ask for it (Transport::IsendInPlace) travel in a single copy
  // whatever their size, to the peers that can read this process and say
  // the same (or have a threshold). Sessions pass true unless
  // HORA_SHM_SINGLE_COPY_BYTES is 0.
  bool single_copy_on_request = false;
};
Result<std::unique_ptr<Transport>> CreateShmTransport(int rank, int size, Store& store,
                                                      const std::string& job_id,
                                                      const ShmOptions& options);

// The ShmOptions::single_copy_bytes a session gives a host's `local_ranks`
// ranks: `configured` where they outnumber the `cores` a rank may run on,
// 0 elsewhere. There a single copy saves a copy's CPU time; with a core
// each, the sender's and the receiver's copies through the slots overlap
// and were faster (docs/dev/performance.md, session 62).
inline size_t ShmSingleCopyBytes(size_t configured, size_t local_ranks, int cores) {
  return cores > 0 && local_ranks > static_cast<size_t>(cores) ? configured : 0;
}
inline Result<std::unique_ptr<Transport>> CreateShmTransport(int rank, int size, Store& store,
                                                             const std::string& job_id,
                                                             Duration timeout,
                                                             Duration spin = kShmSpin) {
  ShmOptions options;
  options.timeout = timeout;
  options.spin = spin;
  return CreateShmTransport(rank, size, store, job_id, options);
}

}  // namespace hora
