// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// GPU tensors through the collectives, staged through pinned host memory
// (docs/dev/gpu.md, "How staging works"). A batch's inputs are packed on the device by one
// batched copy into a device fusion buffer, copied to pinned memory, run
// there by the backend exactly as host tensors would be (so a rank staging
// GPU tensors and a joined rank reducing host placeholders agree on every byte
// on the wire), then copied back and unpacked by one batched copy.
//
// Allreduce and broadcast are pipelined (staged_chunks.h): the copies go in
// chunks, each with its event, and the backend runs each chunk as soon as
// its copy in is done, while later chunks are copied in or earlier ones
// back (on the one stream, every copy in comes before the copies back). Their handles then complete
// without waiting for the copies back: those end with an event the handles hold (device_done.h).
// Adasum and the collectives whose output Hora allocates go whole, and wait
// for their copies back.
//
// Within a host, an allreduce may go instead (where the route table's
// costs say: device_routes.cc) through device windows that every
// rank reads directly, reduced on the GPU (collectives/device_window.h),
// where the set's data Comm has a shared window (Hora's own backend runs
// the set, over shared memory: Windows::comm),
// HORA_GPU_IPC is 1 on every rank, and no rank has joined (a joined rank's
// placeholders are host memory). The window is opened at the first such batch
// and closed when the engine stops everywhere. Where the job spans hosts
// with as many ranks each (backends/host_tiers.h), each host's ranks have
// their window, and only a host's share crosses between hosts
// (allreduce_device_window.h's AcrossHosts); after a failure there, every
// rank stages from then on (device_staging_window.cc).
//
// Batches that NCCL takes (device_nccl.h: HORA_GPU_BACKEND) go there first,
// every collective but barrier and join.
//
// The engine's thread (or a waiter running its cycle) waits for the device's
// copies in, bounded by HORA_TIMEOUT_S (10 minutes when that is 0) each.
//
// Streams: the global process set's engine works on the rank's stream
// (Session::GpuStream). Every other set's engine has a stream of its own,
// so that one set's NCCL calls never wait behind another's on one stream
// (the rank's sets make their calls in one order: nccl_order.h). Each of its
// batches first makes that stream wait for the rank's stream, where the
// tensors' producers were ordered (DLPack's stream argument, or the C++
// caller's wait).
//
// Not thread-safe: the engine's cycle uses it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/host_tiers.h"
#include "collectives/device_window.h"
#include "common/clock.h"
#include "common/logging.h"
#include "device/batch_verdict.h"
#include "device/device_nccl.h"
#include "engine/tensor_records.h"
#include "gpu/device.h"
#include "gpu/device_done.h"

namespace hora {

// What an NCCL batch's turn leaves on the GPU for the turns after it
// (nccl_order.h): an event recorded after its calls on its set's stream.
struct NcclTurnMark final : NcclOrder::Mark {
  NcclTurnMark(std::shared_ptr<gpu::Device> d, gpu::Event e) : device(std::move(d)), event(e) {}
  ~NcclTurnMark() override { (void)device->DestroyEvent(event); }
  NcclTurnMark(const NcclTurnMark&) = delete;
  NcclTurnMark& operator=(const NcclTurnMark&) = delete;
  const std::shared_ptr<gpu::Device> device;
  const gpu::Event event;
};

class DeviceStaging {
 public:
  // Queues its copies on `stream` of `device` (the rank's stream, which
  // frameworks' producers make wait for their work: gpu/lazy_device.h) and
  // waits for them at most `timeout` per step.
  // The device windows' settings (HORA_GPU_IPC, HORA_GPU_WINDOW_BYTES), and
  // where to say why there are none.
  struct Windows {
    // The set's data Comm, where Hora's own backend runs it (null: none,
    // as under MPI's backend): its shared window (ranks of one host), or
    // the tiers of hosts found on it (backends/host_tiers.h), with
    // `selector`'s algorithms.
    Comm* comm = nullptr;
    const Selector* selector = nullptr;
    bool willing = true;
    size_t bytes = size_t{32} << 20;
    const Logger* logger = nullptr;
    // How long the host waits for the device before a step: less than the
    // peers wait for that step (HORA_TIMEOUT_S), so that a stuck device is
    // told by its own rank's step, not found by the others' timeout.
    Duration wait = std::chrono::minutes(10);
  };
  // `stream`: this engine's; where it is not `rank_stream`, it is this
  // object's to destroy.
  // `lost_peer`: a peer lost, named, or OK (the watch of NCCL's work asks).
  DeviceStaging(std::shared_ptr<gpu::Device> device, gpu::Stream stream, gpu::Stream rank_stream,
                Duration timeout, Windows windows, DeviceNccl::Settings nccl,
                std::function<Status()> lost_peer)
      : device_(device),
        lost_peer_(std::move(lost_peer)),
        timeout_(timeout),
        stream_(stream),
        rank_stream_(rank_stream),
        windows_(windows),
        routing_(nccl.routing),
        nccl_(std::move(device), stream, timeout, std::move(nccl)) {
    // (An abort ends queued kernels without their results, and their events
    // then fire: the batches not yet done fail first.)
    nccl_.OnAbort([this](const std::string& why) { FailNcclPending(why); });
  }
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  // Runs `batch` (this rank's records of GPU tensors, one collective) on
  // `data` as RunPlannedBatch does (run_batch.h); `joined_any`: some rank
  // had joined when it was decided (Decision::joined_any).
  Status Run(CollectiveBackend& data, const std::vector<TensorRecord*>& batch, int rank, int size,
             std::vector<std::byte>* fusion, bool joined_any);

  // Batches each route took so far, by the route's name, in the table's
  // order (every row, taken or not), and all of them.
  std::vector<std::pair<std::string, uint64_t>> route_batches() const;
  uint64_t batches() const { return batches_; }

  // Ends NCCL's work at once, queued kernels included (the engine failed:
  // a peer may be lost); later batches for NCCL fail naming `why`.
  void AbortNccl(const std::string& why) { nccl_.Abort(why); }

  // Looks at NCCL's work that has not ended on the GPU (the engine calls
  // it while idle, and at each cycle; it looks every 50 ms at most). A
  // batch's kernels wait for every rank's: where a rank's call failed (it
  // aborted its communicator) and no NCCL batch follows, where that rank
  // would say so, the others' would wait for good. So the oldest such work
  // is warned of every HORA_STALL_WARNING_S, and once it has gone the
  // timeout (HORA_TIMEOUT_S, or 10 minutes when that is 0, as the device's
  // copies) since the NCCL work before it ended, the communicator is
  // aborted: its batches not yet done fail, naming why, and the next NCCL
  // batch makes every rank start anew. (So the timeout also bounds an NCCL
  // batch's own time on the GPU.) Where a peer was lost (`lost_peer`), or
  // NCCL reported an error of its own (a peer's failure seen over the
  // network), that work cannot end: the communicator is aborted at once,
  // naming why. A batch is watched until it ends on the GPU, whether or not
  // its handles are still held.
  // `stopped`: the engine has stopped, so no NCCL batch follows (for the
  // warning's text).
  void WatchNccl(TimePoint now, bool stopped = false);
  // Whether NCCL work not yet ended on the GPU is watched.
  bool WatchesNccl() {
    PruneNcclPending();
    return !nccl_pending_.empty();
  }

  // Collective, when the engine stops on every rank: closes the device
  // window, if one is open.
  Status CloseWindow();

  // "NVIDIA H100 ... (cuda:0)", for errors.
  std::string device_name() const {
    return device_->info().name + " (cuda:" + std::to_string(device_->info().ordinal) + ")";
  }

  // The route table's names, in its order ("one_rank, nccl, ..."), and
  // whether `name` is one of them (HORA_GPU_ROUTE: gpu_routing.h).
  static std::string RouteNames();
  static bool IsRoute(std::string_view name) { return FindRoute(name) != nullptr; }

  // Whether `p` is a record of a GPU tensor (a joined rank's placeholder is
  // host memory whatever its tensor's device), and whether `batch` has one.
  static bool OnDevice(const TensorRecord& p) {
    return p.meta.device == DeviceType::kCUDA && !p.phantom;
  }
  static bool AnyOnDevice(const std::vector<TensorRecord*>& batch) {
    for (const TensorRecord* p : batch) {
      if (OnDevice(*p)) return true;
    }
    return false;
  }

 private:
  // The event and the buffers, at least `pinned` and
  // `on_device` bytes of the last two.
  Status Prepare(size_t pinned, size_t on_device);
  // Waits until the device has done what was queued; `step` names it.
  Status Sync(const char* step);
  // Waits for `e`, at most `bound` (the timeout by default). Where NCCL's
  // work is pending (and may be queued before `e`), a peer lost meanwhile
  // aborts it, so that the wait ends. The device windows wait so too (the
  // waiter OpenWindow gives DeviceWindow::Open).
  Status AwaitDevice(gpu::Event e) { return AwaitDevice(e, timeout_); }
  Status AwaitDevice(gpu::Event e, Duration bound);
  // The same for `wait(deadline)`, a wait for the device (kTimeout at the
  // deadline).
  Status AwaitDevice(const std::function<Status(TimePoint)>& wait, Duration bound);
  Status AwaitDevice(const std::function<Status(TimePoint)>& wait) {
    return AwaitDevice(wait, timeout_);
  }
  // The packed layout: each record's offset (one after another) and the end.
  size_t Layout(const std::vector<TensorRecord*>& batch);
  // The whole batch's input bytes to pinned memory (Adasum, the shaped
  // collectives); Adasum's outputs back. Only
  // the batch's GPU tensors: a joined rank's placeholders, which may share a
  // batch with them, are host memory (HostPartsIn).
  Status CopyIn(const std::vector<TensorRecord*>& batch, size_t bytes);
  Status CopyOut(const std::vector<TensorRecord*>& batch, size_t bytes);
  void HostPartsIn(const std::vector<TensorRecord*>& batch, std::byte* area);
  // Run's choice of path, after FollowTheRankStream: the first of
  // Candidates that does not decline the batch runs it (device_routes.cc).
  Status Route(CollectiveBackend& data, const std::vector<TensorRecord*>& batch, int rank, int size,
               std::vector<std::byte>* fusion, bool joined_any);
  // A batch, as the route table sees it.
  struct RouteAsk {
    CollectiveBackend& data;
    const std::vector<TensorRecord*>& batch;
    const RequestMeta& m;  // (its first tensor's)
    int rank;
    int size;
    std::vector<std::byte>* fusion;  // the engine's host fusion buffer
    bool joined_any;
    size_t bytes;  // RouteBytes: the same on every rank
    // HORA_GPU_ROUTE names the row being asked for this batch's size.
    bool named = false;
  };
  // What a route is predicted to take for a batch of B bytes: `fixed_us`
  // plus B / `gb_per_s`, as the host algorithms' cost model (registry.h)
  // but in one line per route, fitted to a GPU's measured times
  // (device_routes.cc). Every rank predicts alike: the figures are
  // constants, and B is the batch's RouteBytes.
  struct RouteCost {
    double fixed_us;
    double gb_per_s;  // 0: no per-byte term
    double Predict(size_t bytes) const {
      return fixed_us * 1e-6 + (gb_per_s > 0 ? static_cast<double>(bytes) / (gb_per_s * 1e9) : 0.0);
    }
  };
  // A way through the GPU: a row of the route table. Every rank decides
  // alike, from what is the same everywhere: the batch's response, the
  // routing settings (agreed when the Session was made: gpu_routing.h), the
  // join state, NCCL's setup and the backend's window.
  struct RouteRow {
    const char* name;         // in errors, docs and the engine's counters
    const char* description;  // one line
    RouteCost cost;
    // Whether it may take the batch (what it needs).
    bool (*fits)(DeviceStaging& s, const RouteAsk& ask);
    // Runs it; sets `*declined` where, on every rank alike, it cannot after
    // all (NCCL unusable under HORA_GPU_BACKEND=auto, no device window):
    // the next row then takes the batch.
    Status (*run)(DeviceStaging& s, const RouteAsk& ask, bool* declined);
  };
  // A route's row, defined in the route's own file for the route's tag
  // type (an explicit specialisation), where the route's code, a member's,
  // uses this class's parts; device_routes.cc lists the rows. So a route
  // is its file and its line in that list.
  template <typename Tag>
  static const RouteRow& Row();
  // The table (device_routes.cc), in the order that breaks a tie of cost;
  // the last row fits every batch.
  static std::span<const RouteRow* const> Routes();
  static const RouteRow* FindRoute(std::string_view name);
  // The rows that fit `ask`, in the order they are tried: the one
  // HORA_GPU_ROUTE names for its size first, if it fits (then
  // `*first_named`), then the others by their predicted cost.
  std::vector<const RouteRow*> Candidates(const RouteAsk& ask, bool* first_named);
  // A process set's stream: made to wait for the rank's (see the top).
  Status FollowTheRankStream();
  // An allreduce on the device window (opened now at the first), or false
  // in `*ran` when there is none.
  Status RunOnWindow(CollectiveBackend& data, const std::vector<TensorRecord*>& batch, int rank,
                     bool* ran);
  // Collective, at the first batch that may use it: the window, among the
  // ranks of the job, or of each host where it spans hosts.
  Status OpenWindow(CollectiveBackend& data);
  // Across hosts: the host memory for the exchanges, and whether every
  // host's ranks have their window (if not, none keeps it).
  Status AgreeAcrossHosts(CollectiveBackend& data, std::string* why_not);
  void FreeWindowPinned();
  // Whether `batch` is one rank's allreduce or broadcast of GPU tensors,
  // which can run on its GPU alone (the one_rank route).
  static bool RunsOnOneRank(const std::vector<TensorRecord*>& batch, int size, bool joined_any);
  // Allreduce or broadcast through NCCL.
  Status RunOnNccl(CollectiveBackend& data, const std::vector<TensorRecord*>& batch, int rank,
                   int size);
  // Allgather, reducescatter or alltoall through NCCL, into an output
  // allocated on the device.
  Status RunShapedOnNccl(CollectiveBackend& data, TensorRecord& p, int rank, int size);
  // What this rank tells of its part in an NCCL batch before the calls,
  // its preparation having given `st`: kLeftNccl where the communicator was
  // aborted meanwhile (`st` then says why), else kWhole or kCannot.
  BatchPart Part(Status& st);
  // Sync after an NCCL batch's calls, failing where that wait aborted the
  // communicator (which cut the calls short).
  Status SyncAfterNccl();
  // This set's turn to make NCCL's calls for `batch` (nccl_order.h), with
  // its stream made to wait for the last turn's calls of another set.
  Status TakeTurn(const std::vector<TensorRecord*>& batch, int rank, NcclOrder::Turn* turn);
  // Ends `turn`, leaving a mark after its calls on this set's stream where
  // they were made (`called`), for the next turn of another set.
  void EndTurn(NcclOrder::Turn& turn, const Status& called);
  // After a staged collective, or before NCCL's calls (`before_call`):
  // what every rank gave, or can give (batch_verdict.h). Where a rank's
  // communicator was aborted, every rank's is.
  Status ShareVerdict(CollectiveBackend& data, const RequestMeta& m, int rank, int size,
                      BatchPart mine, bool before_call = false);
  // After an NCCL batch's calls: its handles' event, among those whose work
  // an aborted communicator would cut short (and WatchNccl watches).
  void NcclQueued(const RequestMeta& m, int rank);
  // Before the communicator is aborted (DeviceNccl::OnAbort): the NCCL
  // batches not yet done fail (their kernels end without their results).
  void FailNcclPending(const std::string& why);
  // Drops the pending NCCL batches that have ended on the GPU, and aborts
  // the communicator where one ended in the device's failure. (Not those
  // whose handles are gone: a framework hands the event to its stream and
  // drops the handle, and its stream waits for that work as long as it
  // lasts.)
  void PruneNcclPending();
  // Where a peer was lost (lost_peer_), or NCCL reported an error of its
  // own (a peer's failure seen over the network), aborts the communicator,
  // naming `oldest` (what the oldest NCCL batch pending is), and returns
  // true.
  bool AbortNcclIfItCannotEnd(const std::string& oldest);
  // MarkDone, or where it fails, the host waits for the device: a failed
  // batch's handles complete after the copies that may still use its
  // tensors.
  void MarkDoneOrSync(const std::vector<TensorRecord*>& batch, int rank);
  // The size by which HORA_GPU_BACKEND=auto routes `batch`, the same on
  // every rank: its bytes (allreduce, broadcast, reducescatter), allgather's
  // output, alltoall's mean input. Sets Layout's offsets.
  size_t RouteBytes(const std::vector<TensorRecord*>& batch, int size);
  // The batched copy into the device fusion buffer (a fused batch), then the
  // chunks' copies to pinned memory, each followed by its event.
  Status QueueCopiesIn(const std::vector<TensorRecord*>& batch, size_t bytes, size_t chunk);
  // The batched copy of the batch's GPU tensors into the device fusion
  // buffer (`in`: their inputs), or out of it (their outputs).
  Status Packing(const std::vector<TensorRecord*>& batch, bool in);
  // At least `n` chunk events.
  Status ChunkEvents(size_t n);
  // Records the batch's done event and gives it to its GPU tensors' records.
  Status MarkDone(const std::vector<TensorRecord*>& batch, int rank);
  // Waits until the last batch's copies back are done (they read the
  // pinned buffer).
  Status WaitLastDone();
  // Forgets the pinned buffer, which a failed copy may still write.
  void LetGoPinned();
  // Host scratch of `bytes` holding what FillIdentityValues puts there.
  std::byte* IdentityScratch(const std::vector<TensorRecord*>& batch, size_t bytes);
  // What a rank whose device failed contributes: identity values (a
  // reduction's), zeros (the rest).
  void FillIdentityValues(const std::vector<TensorRecord*>& batch, std::byte* area);
  // Moves a host result (allgather, reducescatter, alltoall) to the device.
  Status ResultToDevice(TensorRecord& p);

  const std::shared_ptr<gpu::Device> device_;
  const std::function<Status()> lost_peer_;
  const Duration timeout_;
  const gpu::Stream stream_;
  const gpu::Stream rank_stream_;
  gpu::Event follow_{};  // (recorded on the rank's stream, for stream_ to wait on)
  const Windows windows_;
  const GpuRouting routing_;                   // (the NCCL settings')
  bool window_tried_ = false;                  // Open was called (on every rank alike)
  std::unique_ptr<DeviceWindow> window_;       // null: none (staged)
  Comm* window_comm_ = nullptr;                // the Comm it was opened on
  const HostTiers* tiers_ = nullptr;           // where the job spans hosts
  std::unique_ptr<HostTierComms> tier_comms_;  // (OpenWindow's; kept for the window's life)
  std::byte* window_pinned_ = nullptr;         // (then) host memory for the exchanges
  gpu::Event window_events_[2] = {};           // ... and their copies' events
  bool set_aside_ = false;                     // the window is no longer used (staged)
  std::vector<AllreducePart> window_parts_;
  DeviceNccl nccl_;
  std::shared_ptr<NcclTurnMark> turn_mark_;  // EndTurn's (made at the first)
  bool follows_other_sets_ = false;          // a turn waited for another set's mark
  std::vector<uint64_t> route_batches_;      // by the row's place in Routes()
  uint64_t batches_ = 0;
  gpu::Event event_;
  std::vector<gpu::Event> chunk_events_;  // chunk k's copy in is done
  std::vector<uint8_t> verdict_;          // (ShareVerdict's)
  struct NcclPending {
    std::shared_ptr<DeviceDone> done;
    TimePoint since;       // queued; then when it was first found the oldest
    std::string what;      // "rank 0: allreduce 'w'"
    bool watched = false;  // as the oldest
    TimePoint warn_at{};   // (then) its next warning
  };
  // Starts `p`'s clock, the oldest pending NCCL batch, unless it started.
  void StartTheClock(NcclPending& p, TimePoint now);
  std::vector<NcclPending> nccl_pending_;    // NcclQueued's
  TimePoint next_watch_{};                   // WatchNccl's next look
  std::shared_ptr<DeviceDone> last_done_;    // the last batch's copies back
  std::shared_ptr<DoneEvents> done_events_;  // MarkDone's, made at the first
  bool prepared_ = false;
  std::byte* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
  std::byte* packed_ = nullptr;  // the device fusion buffer
  size_t packed_bytes_ = 0;
  std::vector<size_t> offsets_;                 // Layout's
  std::vector<gpu::CopyPart> parts_;            // a batched copy's
  std::vector<std::pair<void*, void*>> saved_;  // the records' own input and output
  std::vector<std::byte> scratch_;              // where the collective runs when the device failed
};

}  // namespace hora
