// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// CreateShmTransport: creates this rank's segments, exchanges their names
// through the Store, maps the peers' segments and unlinks its own once every
// peer has mapped them (protocol in shm_transport.h).
#include <algorithm>

#include "common/cores.h"
#include "transport/shm/shm_direct.h"
#include "transport/shm/shm_transport.h"
#include "transport/shm/shm_transport_impl.h"

#include <unistd.h>

#include <cstdlib>

namespace hora {
namespace {

std::string Key(const std::string& job_id, const char* what, int rank) {
  return job_id + "/shm/" + what + "/" + std::to_string(rank);
}

// Segment names end in their creator's tag (pid and pid namespace), so
// that those of a process gone (killed during rendezvous) can be found and
// removed by anyone (RemoveDeadShmSegments).
struct Creator {
  int pid = 0;
  uint64_t pid_namespace = 0;
  uint64_t probe_address = 0;  // ShmTransport::direct_probe()'s, and its value
  uint64_t probe_value = 0;

  std::string Tag() const { return ShmCreatorTag(pid, pid_namespace); }
  // "<pid> <namespace>"; the store holds it followed by
  // " <probe address> <probe value>".
  std::string Text() const { return std::to_string(pid) + " " + std::to_string(pid_namespace); }
  static Creator Parse(const Bytes& text) {
    Creator c;
    const std::string s(text.begin(), text.end());
    const char* p = s.c_str();
    char* end = nullptr;
    c.pid = static_cast<int>(std::strtol(p, &end, 10));
    c.pid_namespace = std::strtoull(end, &end, 10);
    c.probe_address = std::strtoull(end, &end, 10);
    c.probe_value = std::strtoull(end, &end, 10);
    return c;
  }
};

std::string BellName(const std::string& job_id, int rank, const Creator& c) {
  return ShmSegmentName(job_id, "bell-" + std::to_string(rank) + "-" + c.Tag());
}

std::string WindowName(const std::string& job_id, int rank, const Creator& c) {
  return ShmSegmentName(job_id, "win-" + std::to_string(rank) + "-" + c.Tag());
}

std::string ChannelName(const std::string& job_id, int src, int dst, const Creator& c) {
  return ShmSegmentName(job_id, std::to_string(src) + "-" + std::to_string(dst) + "-" + c.Tag());
}

Duration Remaining(TimePoint deadline) {
  return std::max<Duration>(Duration::zero(), deadline - Clock::now());
}

std::vector<std::string> SplitLines(const Bytes& value) {
  std::vector<std::string> lines(1);
  for (uint8_t c : value) {
    if (c == '\n') {
      lines.emplace_back();
    } else {
      lines.back().push_back(static_cast<char>(c));
    }
  }
  return lines;
}

// Maps rank `peer`'s doorbell, its windows and its channel to `rank`,
// checking that the names it published are the ones this job uses
// (`creator`: the peer's process).
Status MapPeer(ShmTransport& t, const std::string& job_id, int peer, const Creator& creator,
               const Bytes& published) {
  const std::vector<std::string> names = SplitLines(published);
  const std::string bell = BellName(job_id, peer, creator);
  const std::string window = WindowName(job_id, peer, creator);
  const std::string channel = ChannelName(job_id, peer, t.rank(), creator);
  if (static_cast<int>(names.size()) != t.size() + 1 || names[0] != bell || names[1] != window ||
      std::find(names.begin(), names.end(), channel) == names.end()) {
    return UnavailableError("rank " + std::to_string(peer) +
                            " published unexpected shared-memory segment names (a different "
                            "world size or job?)");
  }
  ShmTransport::Link& link = t.link(peer);
  Result<ShmSegment> b = ShmSegment::Open(bell, ShmDoorbell::kSegmentBytes);
  if (!b.ok()) return b.status();
  HORA_RETURN_IF_ERROR(ShmDoorbell::Check(b->data(), bell));
  link.bell = ShmDoorbell(b->data());
  link.bell_segment = std::move(*b);
  Result<ShmSegment> w =
      ShmSegment::Open(window, ShmWindowSegment::SegmentBytes(), /*populate=*/false);
  if (!w.ok()) return w.status();
  HORA_RETURN_IF_ERROR(ShmWindowSegment::Check(w->data(), window));
  link.window_segment = std::move(*w);
  Result<ShmSegment> c = ShmSegment::Open(channel, ShmChannel::SegmentBytes());
  if (!c.ok()) return c.status();
  HORA_RETURN_IF_ERROR(ShmChannel::Check(c->data(), channel));
  link.in = ShmChannel(c->data());
  link.in_segment = std::move(*c);
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Transport>> CreateShmTransport(int rank, int size, Store& store,
                                                      const std::string& job_id,
                                                      const ShmOptions& options) {
  // Where ranks outnumber the cores this process may run on (its affinity
  // mask: a rank pinned to one core counts one), a polling waiter may hold
  // the core its peer is queued on, so it yields; otherwise yielding only
  // makes the round trip slower.
  const bool yield = size > AvailableCores();
  if (size < 1 || rank < 0 || rank >= size) {
    return InvalidArgument("shm transport: rank " + std::to_string(rank) +
                           " is outside world size " + std::to_string(size));
  }
  HORA_RETURN_IF_ERROR(ValidateShmJobId(job_id));
  const std::string ctx = "rank " + std::to_string(rank) + ": shm transport (job '" + job_id + "')";
  const TimePoint deadline = DeadlineAfter(Clock::now(), options.timeout);
  // On any early return the transport's destructor unmaps everything and
  // unlinks the segments created here.
  auto t = std::make_unique<ShmTransport>(rank, size, options.spin, yield, options.job_ranks);

  // 0. What killed jobs left behind on this host.
  RemoveDeadShmSegments();

  // 1. This rank's segments: its doorbell, its windows and its outgoing
  // channels.
  const Creator me{static_cast<int>(getpid()), PidNamespaceId()};
  std::string names = BellName(job_id, rank, me);
  Result<ShmSegment> bell = ShmSegment::Create(names, ShmDoorbell::kSegmentBytes);
  if (!bell.ok()) return bell.status().WithContext(ctx);
  ShmDoorbell::Initialize(bell->data());
  t->set_own_bell(ShmDoorbell(bell->data()));
  t->own_bell_segment() = std::move(*bell);
  const std::string window = WindowName(job_id, rank, me);
  Result<ShmSegment> win =
      ShmSegment::Create(window, ShmWindowSegment::SegmentBytes(), /*populate=*/false);
  if (!win.ok()) return win.status().WithContext(ctx);
  ShmWindowSegment::Initialize(win->data());
  t->own_window_segment() = std::move(*win);
  names += "\n" + window;
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    const std::string name = ChannelName(job_id, rank, p, me);
    Result<ShmSegment> seg = ShmSegment::Create(name, ShmChannel::SegmentBytes());
    if (!seg.ok()) return seg.status().WithContext(ctx);
    ShmChannel::Initialize(seg->data());
    t->link(p).out = ShmChannel(seg->data());
    t->link(p).out_segment = std::move(*seg);
    names += "\n" + name;
  }

  // By peer: this rank can read it directly; then this rank's threshold
  // (ShmOptions::single_copy_bytes), 8 bytes, and whether it sends in place
  // on request (ShmOptions::single_copy_on_request), 1 byte, so that every
  // rank knows every pair's (ShmTransport::SetDirect).
  const auto n = static_cast<size_t>(size);
  Bytes readable(n + 9, 0);
  for (size_t i = 0; i < 8; ++i) {
    readable[n + i] =
        static_cast<uint8_t>(static_cast<uint64_t>(options.single_copy_bytes) >> (8 * i));
  }
  readable[n + 8] = options.single_copy_on_request ? 1 : 0;
  const bool reads_peers = options.single_copy_bytes != 0 || options.single_copy_on_request;

  // 2. Publish their names (and this process's id, so that peers notice if
  // it dies); map the peers' doorbells and channels to us.
  // (After the process: where peers read to find whether they may read this
  // process's memory directly, and the value they should find.)
  const std::string pid = me.Text() + " " +
                          std::to_string(reinterpret_cast<uintptr_t>(&t->direct_probe())) + " " +
                          std::to_string(t->direct_probe());
  HORA_RETURN_IF_ERROR(
      store.Set(Key(job_id, "pid", rank), Bytes(pid.begin(), pid.end())).WithContext(ctx));
  HORA_RETURN_IF_ERROR(
      store.Set(Key(job_id, "names", rank), Bytes(names.begin(), names.end())).WithContext(ctx));
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    Result<Bytes> value = store.Get(Key(job_id, "names", p), Remaining(deadline));
    if (!value.ok()) {
      return value.status().WithContext(ctx + ": waiting for rank " + std::to_string(p) +
                                        " to publish its shared-memory segments");
    }
    Result<Bytes> peer_pid = store.Get(Key(job_id, "pid", p), Remaining(deadline));
    if (!peer_pid.ok()) return peer_pid.status().WithContext(ctx);
    const Creator them = Creator::Parse(*peer_pid);
    HORA_RETURN_IF_ERROR(MapPeer(*t, job_id, p, them, *value).WithContext(ctx));
    // A pid of another pid namespace means nothing here: such a peer is
    // watched by its heartbeat only.
    const int process = them.pid_namespace == me.pid_namespace ? them.pid : 0;
    t->WatchPeerProcess(p, process);
    readable[static_cast<size_t>(p)] =
        reads_peers && CanReadProcess(process, them.probe_address, them.probe_value);
  }

  // 3. Once every peer mapped this rank's segments, their names can go: from
  // here on nothing is left under /dev/shm whatever happens to the processes.
  // Its value says which peers this rank can read directly: a peer sends
  // its large messages direct only to ranks that can.
  HORA_RETURN_IF_ERROR(store.Set(Key(job_id, "mapped", rank), readable).WithContext(ctx));
  std::vector<Bytes> mapped(n);
  mapped[static_cast<size_t>(rank)] = readable;
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    Result<Bytes> value = store.Get(Key(job_id, "mapped", p), Remaining(deadline));
    if (!value.ok()) {
      return value.status().WithContext(ctx + ": waiting for rank " + std::to_string(p) +
                                        " to map the shared-memory segments");
    }
    if (value->size() != n + 9) {
      return MismatchError(ctx + ": rank " + std::to_string(p) + " published " +
                           std::to_string(value->size()) + " bytes of readable peers, not " +
                           std::to_string(n + 9) + " (another version of Hora?)");
    }
    mapped[static_cast<size_t>(p)] = std::move(*value);
  }
  // Rank a sends to rank b directly from a's threshold on, and on request
  // where a says so, where b reads a.
  std::vector<size_t> direct_min(n * n, 0);
  std::vector<uint8_t> on_request(n * n, 0);
  for (size_t a = 0; a < n; ++a) {
    uint64_t threshold = 0;
    for (size_t i = 0; i < 8; ++i) threshold |= uint64_t{mapped[a][n + i]} << (8 * i);
    for (size_t b = 0; b < n; ++b) {
      if (a == b || mapped[b][a] == 0) continue;
      direct_min[a * n + b] = static_cast<size_t>(threshold);
      on_request[a * n + b] = mapped[a][n + 8];
    }
  }
  t->SetDirect(std::move(direct_min), std::move(on_request));
  HORA_RETURN_IF_ERROR(t->own_bell_segment().Unlink().WithContext(ctx));
  HORA_RETURN_IF_ERROR(t->own_window_segment().Unlink().WithContext(ctx));
  for (int p = 0; p < size; ++p) {
    if (p != rank) HORA_RETURN_IF_ERROR(t->link(p).out_segment.Unlink().WithContext(ctx));
  }
  t->SetNaming(job_id, me.Tag());
  t->OpenWindows();
  t->StartHeartbeat(options.peer_timeout);
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace hora
