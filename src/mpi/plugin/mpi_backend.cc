// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// HORA_BACKEND=mpi: each collective is the MPI library's own, in its
// nonblocking form (MPI_Iallreduce, MPI_Iallgatherv, MPI_Ibcast,
// MPI_Ireduce_scatter, MPI_Ialltoallv, MPI_Ibarrier), tested until done or
// until the Session's timeout. MPI cannot cancel a started collective, so a
// timeout leaves this backend unusable: later calls fail with that reason.
//
// HORA_BACKEND=mpi-blocking: the blocking forms (MPI_Allreduce, ...), which
// MPI libraries tune separately (OpenMPI: coll/tuned, not libnbc) and which
// MPI benchmarks measure. A blocking call cannot be left, so a watchdog
// thread ends the job (MPI_Abort on MPI_COMM_WORLD, after a message naming
// the rank and call) when one outlasts the timeout: the error reaches every
// rank as the job's end, as mpirun reports an aborted rank. Blocking calls
// are made without the library's lock (a rank blocked in one collective
// while holding it would keep its other threads from entering the collective
// a peer is blocked in: a deadlock), so this needs MPI_THREAD_MULTIPLE.
//
// Reductions keep Hora's semantics: average is a sum followed by Hora's
// finalisation (integers round toward zero), scale factors are applied by
// Hora's kernels before and after, float16/bfloat16/bool and 8-bit integers
// reduce with Hora's kernels registered as MPI ops (see Library::Op). Min and max of floats follow
// the MPI library for NaN and signed zeros.
#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "collectives/allreduce_common.h"
#include "kernels/reduce.h"
#include "mpi/plugin/mpi_library.h"

namespace hora::mpi {
namespace {

constexpr size_t kMaxCount = INT_MAX;
// How long the watchdog waits between its message and MPI_Abort.
constexpr auto kForwardPause = std::chrono::milliseconds(500);

std::string Seconds(Duration d) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.3g", DurationToSeconds(d));
  return secs;
}

// Ends the job when a blocking MPI call outlasts the timeout, and reports
// one that runs long. Arm just before the call, Disarm after; one call at a
// time (the backend's caller is serial). Arming wakes the thread only when
// it sleeps without a deadline (a deadline it already waits for is earlier
// than the new one).
class Watchdog {
 public:
  Watchdog(const WaitPolicy& waits, int rank)
      : waits_(waits), rank_(rank), thread_([this] { Loop(); }) {}
  ~Watchdog() {
    {
      MutexLock lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  // `op` and `call` are string literals (kept as pointers).
  void Arm(const char* op, const char* call) HORA_EXCLUDES(mu_) {
    bool wake;
    {
      MutexLock lock(mu_);
      op_ = op;
      call_ = call;
      armed_at_ = Clock::now();
      deadline_ = waits_.timeout > Duration::zero() ? DeadlineAfter(armed_at_, waits_.timeout)
                                                    : TimePoint::max();
      next_report_ = waits_.report_every > Duration::zero()
                         ? DeadlineAfter(armed_at_, waits_.report_every)
                         : TimePoint::max();
      armed_ = true;
      wake = idle_;
    }
    if (wake) cv_.notify_one();
  }
  void Disarm() HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    armed_ = false;
  }

 private:
  void Loop() HORA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    while (!stop_) {
      if (!armed_ || (deadline_ == TimePoint::max() && next_report_ == TimePoint::max())) {
        idle_ = true;
        cv_.wait(lock.native());
        idle_ = false;
        continue;
      }
      const TimePoint now = Clock::now();
      if (now >= next_report_) {
        if (waits_.logger != nullptr) {
          waits_.logger->Warning("stall: rank " + std::to_string(rank_) + ": " + op_ +
                                 " (mpi-blocking): " + call_ + " has run for " +
                                 Seconds(now - armed_at_) + " s: a rank has not joined it");
        }
        next_report_ = DeadlineAfter(next_report_, waits_.report_every);
        continue;
      }
      if (now < deadline_) {
        cv_.wait_until(lock.native(), std::min(deadline_, next_report_));
        continue;
      }
      std::fprintf(stderr,
                   "hora: rank %d: %s (mpi-blocking): %s did not finish within %s s "
                   "(HORA_TIMEOUT_S): a rank did not join it. A blocking MPI call cannot be "
                   "interrupted, so the job is aborted (MPI_Abort); HORA_BACKEND=mpi waits with "
                   "a timeout instead\n",
                   rank_, op_, call_, Seconds(waits_.timeout).c_str());
      std::fflush(stderr);
      // The message travels rank -> launcher proxy -> mpirun, and the abort
      // beside it on another channel: MPICH's hydra can end the job before
      // forwarding the message (about 1 run in 10 printed nothing). A pause
      // lets it through; the job is ending anyway.
      std::this_thread::sleep_for(kForwardPause);
      MPI_Abort(MPI_COMM_WORLD, 1);  // another thread is inside MPI: needs MPI_THREAD_MULTIPLE
      std::_Exit(1);
    }
  }

  const WaitPolicy waits_;
  Mutex mu_;
  std::condition_variable cv_;
  const int rank_;
  bool stop_ HORA_GUARDED_BY(mu_) = false;
  bool armed_ HORA_GUARDED_BY(mu_) = false;
  bool idle_ HORA_GUARDED_BY(mu_) = false;  // the thread sleeps with no deadline
  TimePoint armed_at_ HORA_GUARDED_BY(mu_);
  TimePoint deadline_ HORA_GUARDED_BY(mu_);
  TimePoint next_report_ HORA_GUARDED_BY(mu_);
  const char* op_ HORA_GUARDED_BY(mu_) = "";
  const char* call_ HORA_GUARDED_BY(mu_) = "";
  std::thread thread_;  // last: starts once the rest is set up
};

class MpiBackend final : public CollectiveBackend {
 public:
  MpiBackend(Library& lib, MPI_Comm comm, const WaitPolicy& waits, bool blocking)
      : lib_(lib), comm_(comm), waits_(waits) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    if (blocking) watchdog_ = std::make_unique<Watchdog>(waits, rank_);
  }
  ~MpiBackend() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && broken_.empty()) {
      MutexLock lock(lib_.mu());
      MPI_Comm_free(&comm_);
    }
  }

  const char* name() const override { return watchdog_ ? "mpi-blocking" : "mpi"; }

  Status Allreduce(const AllreduceArgs& args) override {
    HORA_RETURN_IF_ERROR(Usable("allreduce"));
    if (args.reduction.op == ReduceOp::kAdasum) {
      return UnimplementedError(
          "allreduce: MPI has no Adasum; it runs on the hora backend "
          "(HORA_BACKEND=hora, also over HORA_TRANSPORT=mpi)");
    }
    AllreducePrologue(args);  // out = in * prescale
    const MPI_Datatype type = lib_.Datatype(args.dtype);
    const MPI_Op op = lib_.Op(args.dtype, ReducingOp(args.reduction.op));
    const size_t esize = DataTypeSize(args.dtype);
    for (size_t off = 0; off < args.count; off += kMaxCount) {
      const int n = static_cast<int>(std::min(kMaxCount, args.count - off));
      auto* at = static_cast<char*>(args.out) + off * esize;
      HORA_RETURN_IF_ERROR(Run("allreduce", "MPI_Iallreduce", "MPI_Allreduce", [&](MPI_Request* r) {
        return r ? MPI_Iallreduce(MPI_IN_PLACE, at, n, type, op, comm_, r)
                 : MPI_Allreduce(MPI_IN_PLACE, at, n, type, op, comm_);
      }));
    }
    AllreduceFinalize(args, size_, 0, args.count);
    return Status::Ok();
  }

  Status Allgatherv(const void* in, void* out, std::span<const size_t> bytes_per_rank) override {
    HORA_RETURN_IF_ERROR(Usable("allgather"));
    std::vector<int> counts, displs;
    HORA_RETURN_IF_ERROR(Counts("allgather", bytes_per_rank, &counts, &displs));
    char* mine = static_cast<char*>(out) + displs[static_cast<size_t>(rank_)];
    const void* send = in == mine ? MPI_IN_PLACE : in;
    const int my_count = counts[static_cast<size_t>(rank_)];
    return Run("allgather", "MPI_Iallgatherv", "MPI_Allgatherv", [&](MPI_Request* r) {
      return r ? MPI_Iallgatherv(send, my_count, MPI_BYTE, out, counts.data(), displs.data(),
                                 MPI_BYTE, comm_, r)
               : MPI_Allgatherv(send, my_count, MPI_BYTE, out, counts.data(), displs.data(),
                                MPI_BYTE, comm_);
    });
  }

  Status Broadcast(void* data, size_t bytes, int root) override {
    HORA_RETURN_IF_ERROR(Usable("broadcast"));
    for (size_t off = 0; off < bytes; off += kMaxCount) {
      const int n = static_cast<int>(std::min(kMaxCount, bytes - off));
      char* at = static_cast<char*>(data) + off;
      HORA_RETURN_IF_ERROR(Run("broadcast", "MPI_Ibcast", "MPI_Bcast", [&](MPI_Request* r) {
        return r ? MPI_Ibcast(at, n, MPI_BYTE, root, comm_, r)
                 : MPI_Bcast(at, n, MPI_BYTE, root, comm_);
      }));
    }
    return Status::Ok();
  }

  Status Reducescatter(const void* in, void* out, std::span<const size_t> counts, DataType dtype,
                       const Reduction& reduction) override {
    HORA_RETURN_IF_ERROR(Usable("reducescatter"));
    const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
    std::vector<int> recv(counts.size());
    for (size_t p = 0; p < counts.size(); ++p) {
      if (counts[p] > kMaxCount || total > kMaxCount) return TooLarge("reducescatter", total);
      recv[p] = static_cast<int>(counts[p]);
    }
    const size_t esize = DataTypeSize(dtype);
    std::vector<std::byte> scaled;
    if (reduction.prescale_factor != 1.0 && total > 0) {
      scaled.resize(total * esize);
      kernels::Scale(dtype, reduction.prescale_factor, scaled.data(), in, total);
      in = scaled.data();
    }
    const MPI_Datatype type = lib_.Datatype(dtype);
    const MPI_Op op = lib_.Op(dtype, ReducingOp(reduction.op));
    HORA_RETURN_IF_ERROR(
        Run("reducescatter", "MPI_Ireduce_scatter", "MPI_Reduce_scatter", [&](MPI_Request* r) {
          return r ? MPI_Ireduce_scatter(in, out, recv.data(), type, op, comm_, r)
                   : MPI_Reduce_scatter(in, out, recv.data(), type, op, comm_);
        }));
    const size_t mine = counts[static_cast<size_t>(rank_)];
    AllreduceArgs args{out, out, mine, dtype, reduction};
    AllreduceFinalize(args, size_, 0, mine);
    return Status::Ok();
  }

  Status Alltoallv(const void* in, std::span<const size_t> send_bytes, void* out,
                   std::span<const size_t> recv_bytes) override {
    HORA_RETURN_IF_ERROR(Usable("alltoall"));
    std::vector<int> scounts, sdispls, rcounts, rdispls;
    HORA_RETURN_IF_ERROR(Counts("alltoall", send_bytes, &scounts, &sdispls));
    HORA_RETURN_IF_ERROR(Counts("alltoall", recv_bytes, &rcounts, &rdispls));
    return Run("alltoall", "MPI_Ialltoallv", "MPI_Alltoallv", [&](MPI_Request* r) {
      return r ? MPI_Ialltoallv(in, scounts.data(), sdispls.data(), MPI_BYTE, out, rcounts.data(),
                                rdispls.data(), MPI_BYTE, comm_, r)
               : MPI_Alltoallv(in, scounts.data(), sdispls.data(), MPI_BYTE, out, rcounts.data(),
                               rdispls.data(), MPI_BYTE, comm_);
    });
  }

  Status Barrier() override {
    HORA_RETURN_IF_ERROR(Usable("barrier"));
    return Run("barrier", "MPI_Ibarrier", "MPI_Barrier",
               [&](MPI_Request* r) { return r ? MPI_Ibarrier(comm_, r) : MPI_Barrier(comm_); });
  }

 private:
  std::string Where(const char* op) const {
    return "rank " + std::to_string(rank_) + ": " + op + " (" + name() + ")";
  }

  Status Usable(const char* op) const {
    if (broken_.empty()) return Status::Ok();
    return AbortedError(Where(op) + ": the MPI backend is unusable after an earlier failure (" +
                        broken_ + "); MPI cannot cancel a started collective");
  }

  Status TooLarge(const char* op, size_t n) const {
    return UnimplementedError(Where(op) + ": " + std::to_string(n) +
                              " elements or bytes exceed MPI's int counts; use HORA_BACKEND=hora");
  }

  // Byte counts and displacements as MPI ints.
  Status Counts(const char* op, std::span<const size_t> bytes, std::vector<int>* counts,
                std::vector<int>* displs) const {
    size_t off = 0;
    for (size_t b : bytes) {
      if (b > kMaxCount || off > kMaxCount) return TooLarge(op, off + b);
      counts->push_back(static_cast<int>(b));
      displs->push_back(static_cast<int>(off));
      off += b;
    }
    return Status::Ok();
  }

  // Starts one nonblocking collective and tests it until done or the timeout;
  // blocking, calls the blocking form under the watchdog. `start(request)`
  // starts the nonblocking form, `start(nullptr)` calls the blocking one.
  template <typename Start>
  Status Run(const char* op, const char* nonblocking_call, const char* blocking_call,
             Start&& start) {
    if (watchdog_) {  // no lock: see the top of this file
      watchdog_->Arm(op, blocking_call);
      const int rc = start(nullptr);
      watchdog_->Disarm();
      if (rc != MPI_SUCCESS) {
        broken_ = std::string(blocking_call) + " failed";
        return UnavailableError(Where(op) + ": " + blocking_call + ": " + MpiErrorString(rc));
      }
      return Status::Ok();
    }
    const char* call = nonblocking_call;
    MPI_Request r = MPI_REQUEST_NULL;
    int rc;
    {
      MutexLock lock(lib_.mu());
      rc = start(&r);
    }
    if (rc != MPI_SUCCESS)
      return UnavailableError(Where(op) + ": " + call + ": " + MpiErrorString(rc));
    const TimePoint began = Clock::now();
    const TimePoint deadline =
        waits_.timeout > Duration::zero() ? DeadlineAfter(began, waits_.timeout) : TimePoint::max();
    TimePoint next_report = waits_.report_every > Duration::zero() && waits_.logger != nullptr
                                ? DeadlineAfter(began, waits_.report_every)
                                : TimePoint::max();
    for (int spins = 0;; ++spins) {
      int flag = 0;
      {
        MutexLock lock(lib_.mu());
        rc = MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
      }
      if (rc != MPI_SUCCESS) {
        broken_ = std::string(call) + " failed";
        return UnavailableError(Where(op) + ": " + call + ": " + MpiErrorString(rc));
      }
      if (flag) return Status::Ok();
      const TimePoint now = Clock::now();
      if (now >= next_report) {
        waits_.logger->Warning("stall: " + Where(op) + ": " + call + " has waited " +
                               Seconds(now - began) + " s: a rank has not joined it");
        next_report = DeadlineAfter(next_report, waits_.report_every);
      }
      if (now >= deadline) {
        broken_ = std::string(call) + " timed out";
        return TimeoutError(Where(op) + ": timed out after " + Seconds(waits_.timeout) +
                            " s (HORA_TIMEOUT_S) in " + call +
                            "; a rank did not join it. MPI cannot cancel a started collective, "
                            "so this session runs no more collectives");
      }
      // A long wait (another rank busy: there is no timeout by default)
      // yields the core, then sleeps a little between tests.
      if (spins > 4096) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      } else if (spins > 256) {
        std::this_thread::yield();
      }
    }
  }

  Library& lib_;
  MPI_Comm comm_;
  const WaitPolicy waits_;
  int rank_ = 0;
  int size_ = 1;
  std::string broken_;                  // why the backend is unusable; empty while it works
  std::unique_ptr<Watchdog> watchdog_;  // blocking forms only
};

}  // namespace

Result<std::unique_ptr<CollectiveBackend>> Library::CreateBackend(const WaitPolicy& waits,
                                                                  bool blocking) {
  if (blocking && !thread_multiple()) {
    return UnavailableError(
        "HORA_BACKEND=mpi-blocking needs MPI_THREAD_MULTIPLE (its blocking calls run without "
        "Hora's MPI lock, and its watchdog may call MPI_Abort while another thread is inside "
        "MPI); this process's MPI gives less. Initialise MPI with MPI_Init_thread(..., "
        "MPI_THREAD_MULTIPLE, ...) or use HORA_BACKEND=mpi");
  }
  HORA_ASSIGN_OR_RETURN(MPI_Comm comm, DupWorld("backend"));
  return std::unique_ptr<CollectiveBackend>(new MpiBackend(*this, comm, waits, blocking));
}

}  // namespace hora::mpi
