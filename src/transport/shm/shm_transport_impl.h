// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Internal to the shm transport: the Transport object of one rank, with its
// matching and progress state (shm_transport.cc). shm_rendezvous.cc builds it.
// Contracts are in shm_transport.h.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/thread_name.h"
#include "net/socket.h"
#include "transport/buffer_pool.h"
#include "transport/shm/shm_channel.h"
#include "transport/shm/shm_doorbell.h"
#include "transport/shm/shm_segment.h"
#include "transport/shm/shm_window.h"
#include "transport/transport.h"

namespace hora {

class ShmTransport final : public Transport {
 public:
  // Everything about one peer. The segments keep the mappings alive; the
  // channel and doorbell views point into them. Once set up, the members
  // from beat_seen on, and the channels' positions, change only under the
  // transport's mu_: the functions that touch them say HORA_REQUIRES(mu_)
  // (the analysis cannot tie a Link's members to that mutex).
  struct Link {
    ShmSegment out_segment;  // this rank -> peer (created here)
    ShmChannel out;
    ShmSegment in_segment;  // peer -> this rank (created by the peer)
    ShmChannel in;
    ShmSegment bell_segment;  // the peer's doorbell
    ShmDoorbell bell;
    ShmSegment window_segment;  // the peer's windows (shm_window.h)
    int peer_pid = 0;           // the peer's process (0: unknown; equal to ours: a thread)
    net::Fd pidfd;              // the peer's process, where the kernel gives one
    // Sends to the peer of at least this many bytes go direct (the peer
    // reads them from this process, shm_direct.h); 0: never (the peer cannot
    // read this process or said HORA_SHM_SINGLE_COPY_BYTES=0, or this rank
    // has no threshold: its host's ranks do not outnumber its cores).
    size_t direct_min_bytes = 0;
    // IsendInPlace to the peer goes direct whatever its size (the peer
    // reads this process, and single copy is not off on either side).
    bool direct_on_request = false;
    uint64_t beat_seen = 0;    // its heartbeat as last read (CheckHeartbeats)
    TimePoint beat_changed{};  // when that changed

    struct Send {
      Request request;
      Tag tag;
      const std::byte* data;
      size_t bytes;
      size_t written = 0;
      bool started = false;
      uint64_t direct_until = 0;  // sent direct: done once the channel released this many slots
      bool declined = false;      // the receiver declined it direct: through the slots
      bool in_place = false;      // by IsendInPlace
    };
    std::deque<Send> sends;  // in posting order; the front one is being written
    std::string out_broken;  // why sends to the peer fail; empty while usable

    struct Recv {
      Request request;
      Tag tag = 0;
      std::byte* data = nullptr;
      size_t bytes = 0;
      std::optional<ReduceSpec> reduce;
    };
    std::deque<Recv> posted;  // receives waiting for a message, in posting order
    struct Message {
      Tag tag;
      size_t bytes;
      PooledBuffer data;  // from the transport's pool_
    };
    std::deque<Message> unexpected;  // whole messages nobody had asked for yet

    // The message being consumed from the head of the ring.
    enum class Sink { kNone, kRecv, kUnexpected, kDiscard };
    struct Current {
      Sink sink = Sink::kNone;
      Tag tag = 0;
      size_t bytes = 0;     // whole message
      size_t received = 0;  // consumed so far
      Recv recv;            // kRecv
      PooledBuffer buffer;  // kUnexpected (from pool_)
    } current;
    std::string in_broken;  // why receives from the peer fail; empty while usable
  };

  // `job_ranks`: ShmOptions::job_ranks.
  ShmTransport(int rank, int size, Duration spin, bool yield, std::vector<int> job_ranks = {});
  ~ShmTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "shm"; }

  Request Isend(int peer, Tag tag, const void* data, size_t bytes) override HORA_EXCLUDES(mu_) {
    return Send(peer, tag, data, bytes, /*in_place=*/false);
  }
  Request IsendInPlace(int peer, Tag tag, const void* data, size_t bytes) override
      HORA_EXCLUDES(mu_) {
    return Send(peer, tag, data, bytes, /*in_place=*/true);
  }
  Request Irecv(int peer, Tag tag, void* data, size_t bytes) override;
  Request IrecvReduce(int peer, Tag tag, void* dst, size_t count, const ReduceSpec& spec) override;
  void Cancel(const Request& request) override HORA_EXCLUDES(mu_);
  Status Wait(const Request& request, TimePoint deadline) override;
  Status WaitFor(const Request& request, Duration timeout) override;
  bool Progress() override { return ProgressAll(); }
  bool ReadsInPlace(int from, int to, size_t bytes) override {
    if (from < 0 || from >= size_ || to < 0 || to >= size_ || from == to) return false;
    const size_t min = direct_min_[static_cast<size_t>(from * size_ + to)];
    return min != 0 && bytes >= min;
  }
  bool ReadsOnRequest(int from, int to) override {
    if (from < 0 || from >= size_ || to < 0 || to >= size_ || from == to) return false;
    return on_request_[static_cast<size_t>(from * size_ + to)] != 0;
  }
  Status LostPeer() override HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return lost_;
  }
  int SilentPeer() override HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return silent_peer_;
  }
  // Fails every request, and every later one, with `why`: what the liveness
  // checks do once a peer's process is gone (shm_liveness.cc). For tests,
  // which run ranks as threads of one process: no peer of theirs can end.
  void MarkLost(Status why) HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (lost_.ok()) MarkLostLocked(std::move(why));
  }
  SharedWindow* Window(uint32_t context) override {
    return context < windows_.size() ? windows_[context].get() : nullptr;
  }
  // Wait and WaitFor: until `deadline`, or `timeout` after the first clock read.
  Status WaitUntil(const Request& request, std::optional<TimePoint> deadline, Duration timeout);

  // Set up by the rendezvous before first use.
  Link& link(int peer) { return *links_[static_cast<size_t>(peer)]; }
  ShmSegment& own_bell_segment() { return own_bell_segment_; }
  void set_own_bell(ShmDoorbell bell) { own_bell_ = bell; }
  ShmSegment& own_window_segment() { return own_window_segment_; }
  // What a peer reads to find whether it can read this process directly
  // (CanReadProcess): this value, at its own address.
  const uint64_t& direct_probe() const { return direct_probe_; }
  // Every pair's threshold of single copy (0: never), rank `from` to rank
  // `to` at [from * size + to] (ReadsInPlace), whether its IsendInPlace goes
  // direct (ReadsOnRequest), and this rank's links' Link::direct_min_bytes
  // and direct_on_request from them: once, by the rendezvous, before any
  // other thread uses the transport (read without a lock from then on).
  void SetDirect(std::vector<size_t> direct_min, std::vector<uint8_t> on_request) {
    direct_min_ = std::move(direct_min);
    on_request_ = std::move(on_request);
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      const auto pair = static_cast<size_t>(rank_ * size_ + p);
      link(p).direct_min_bytes = direct_min_[pair];
      link(p).direct_on_request = on_request_[pair] != 0;
    }
  }
  // Once every window segment is mapped: makes the windows.
  void OpenWindows();

  // For the windows (shm_window.cc).
  ShmDoorbell& own_bell() { return own_bell_; }
  Duration spin() const { return spin_; }
  bool yield() const { return yield_; }
  // Rings the doorbells of `ranks` (this rank's own aside), or, where empty,
  // of every peer.
  void RingPeers(std::span<const int> ranks = {});
  // Names of segments made after the rendezvous (a process set's windows,
  // shm_group_windows.h): the job id the rendezvous had, and the tag of
  // this process (ShmCreatorTag). Set once, by the rendezvous.
  void SetNaming(std::string job_id, std::string creator_tag) {
    job_id_ = std::move(job_id);
    creator_tag_ = std::move(creator_tag);
  }
  const std::string& job_id() const { return job_id_; }
  const std::string& creator_tag() const { return creator_tag_; }
  Result<std::unique_ptr<PendingGroupWindows>> PrepareGroupWindows(std::span<const int> ranks,
                                                                   uint64_t key) override;
  // "rank 5": group rank `k` as the job numbers it, for messages.
  std::string Name(int k) const {
    return "rank " + std::to_string(job_ranks_.empty() ? k : job_ranks_[static_cast<size_t>(k)]);
  }
  // Why `peer` will never make progress again (its process is gone, found
  // by the liveness check when one is due, or it closed its transport), or
  // OK.
  Status PeerGone(int peer) HORA_EXCLUDES(mu_);

  // Liveness (shm_liveness.cc), set up by the rendezvous: `pid` is rank
  // `peer`'s process. StartHeartbeat starts the thread that bumps this
  // rank's heartbeat and finds lost peers: a process that ended, or, with a
  // nonzero `peer_timeout`, a heartbeat that did not move for that long.
  void WatchPeerProcess(int peer, int pid);
  void StartHeartbeat(Duration peer_timeout);

 private:
  Request Send(int peer, Tag tag, const void* data, size_t bytes, bool in_place) HORA_EXCLUDES(mu_);
  Request Post(int peer, Tag tag, void* data, size_t bytes, std::optional<ReduceSpec> reduce)
      HORA_EXCLUDES(mu_);
  bool ValidPeer(int peer, const Request& request) HORA_REQUIRES(mu_);

  // Each returns whether it moved anything. ProgressAll takes the lock
  // (or, unless `wait_for_lock`, gives up when another thread holds it);
  // the others run under it.
  bool ProgressAll(bool wait_for_lock = false) HORA_EXCLUDES(mu_);
  bool ProgressAllLocked() HORA_REQUIRES(mu_);
  bool ProgressSends(int peer, Link& link) HORA_REQUIRES(mu_);
  // Whether `l`'s front send, if started, can be given up without breaking
  // the channel: a direct one its receiver finished, or had not claimed
  // (withdrawn here, so that the receiver skips it). Otherwise the
  // receiver must be told (MarkBroken) rather than read a buffer that may
  // go.
  static bool LeavesChannelWhole(Link& l);
  // Cancel of the front send, direct and published: withdrawn (Aborted),
  // or, where the receiver claimed it, done once it released it (OK);
  // false where that did not happen within kShmClaimedReadWait.
  bool CancelDirect(Link& l) HORA_REQUIRES(mu_);
  bool ProgressRecvs(int peer, Link& link) HORA_REQUIRES(mu_);
  // Picks where the message whose first slot is `first` goes; false leaves
  // it in the ring (no receive from the peer is posted).
  bool StartMessage(int peer, Link& link, const ShmSlotInfo& first) HORA_REQUIRES(mu_);
  void FinishMessage(int peer, Link& link) HORA_REQUIRES(mu_);
  void BreakInbound(Link& link, const std::string& why) HORA_REQUIRES(mu_);
  // Takes the whole of the direct message `l.current`, at `address` in the
  // peer's process, into its sink; false when the channel broke.
  bool ReadDirect(int peer, Link& l, uint64_t address) HORA_REQUIRES(mu_);
  // Copies or reduces `bytes` bytes of a message into `recv` at `offset`.
  static void Deliver(const Link::Recv& recv, size_t offset, const std::byte* src, size_t bytes);
  std::string MismatchMessage(int peer, Tag tag, size_t sent, size_t expected) const;
  // A peer process that ended without closing its transport (killed,
  // crashed) can no longer ring or write: Wait notices it by checking the
  // peers' processes each time it wakes from sleeping, and then fails every
  // pending request naming the lost rank. Returns whether a peer was lost.
  bool CheckPeersAlive() HORA_EXCLUDES(mu_);
  // Whether a liveness check is due (at most one per kShmLivenessEvery,
  // across threads); claims it when it is.
  bool LivenessDue();
  // `l`'s process has ended (it may not have been reaped yet).
  static bool ProcessEnded(const Link& l);
  // `l`'s peer closed its transport on purpose.
  static bool SessionEnded(const Link& l);
  // Records why the group is broken, fails every pending request with it
  // and wakes this rank's sleepers.
  void MarkLostLocked(Status why) HORA_REQUIRES(mu_);
  // The heartbeat thread: beats, then looks at the peers, every fifth of
  // the peer timeout; Stop joins it (the destructor, first).
  void HeartbeatLoop(TimePoint started) HORA_EXCLUDES(beat_mu_);
  // `fresh_start`: this round came late (heartbeat.h): silences count anew.
  void CheckHeartbeats(TimePoint now, bool fresh_start) HORA_EXCLUDES(mu_);
  void StopHeartbeat() HORA_EXCLUDES(beat_mu_);

  const int rank_;
  const int size_;
  const Duration spin_;  // Wait polls this long before it sleeps
  const bool yield_;     // polling, yield the core after every poll (ranks outnumber cores)
  const std::vector<int> job_ranks_;          // see Name
  std::string job_id_;                        // see SetNaming
  std::string creator_tag_;                   // see SetNaming
  const uint64_t direct_probe_;               // see direct_probe()
  std::atomic<int64_t> last_liveness_ns_{0};  // steady clock, last CheckPeersAlive from Wait
  std::vector<std::unique_ptr<Link>> links_;  // by peer; null for this rank
  std::vector<size_t> direct_min_;            // see SetDirect
  std::vector<uint8_t> on_request_;           // see SetDirect
  ShmSegment own_bell_segment_;
  ShmDoorbell own_bell_;
  ShmSegment own_window_segment_;
  std::vector<std::unique_ptr<ShmWindow>> windows_;  // by context
  // Guards what changes after setup (the links' state, see Link, and the
  // members below): the engine's thread and the caller's may use the
  // transport at once (separate Comm contexts).
  Mutex mu_;
  Status lost_ HORA_GUARDED_BY(mu_);           // set once a peer process is gone
  int silent_peer_ HORA_GUARDED_BY(mu_) = -1;  // the peer lost_ found silent
  BufferPool pool_ HORA_GUARDED_BY(mu_);       // payloads of messages set aside

  Duration peer_timeout_{};  // zero: a silent heartbeat is not a loss
  Mutex beat_mu_;
  std::condition_variable beat_cv_;
  bool beat_stop_ HORA_GUARDED_BY(beat_mu_) = false;
  std::thread beat_thread_;
};

// The first entry of `list` (posted receives, set-aside messages) with `tag`.
template <typename List>
auto FindTag(List& list, Tag tag) {
  return std::find_if(list.begin(), list.end(), [tag](const auto& e) { return e.tag == tag; });
}

}  // namespace hora
