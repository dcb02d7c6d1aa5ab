// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// HORA_BACKEND=mpi: each collective is the MPI library's own, in its
// nonblocking form (MPI_Iallreduce, MPI_Iallgatherv, MPI_Ibcast,
// MPI_Ireduce_scatter, MPI_Ialltoallv, MPI_Ibarrier), tested until done or
// until the Session's timeout. MPI cannot cancel a started collective, so a
// timeout leaves this backend unusable: later calls fail with that reason.
//
// Reductions keep Hora's semantics: average is a sum followed by Hora's
// finalisation (integers round toward zero), scale factors are applied by
// Hora's kernels before and after, float16/bfloat16/bool and 8-bit integers
// reduce with Hora's kernels registered as MPI ops (see Library::Op). Min and max of floats follow
// the MPI library for NaN and signed zeros.
#include <climits>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "collectives/allreduce_common.h"
#include "collectives/kernels/reduce.h"
#include "mpi/plugin/mpi_library.h"

namespace hora::mpi {
namespace {

constexpr size_t kMaxCount = INT_MAX;

class MpiBackend final : public CollectiveBackend {
 public:
  MpiBackend(Library& lib, MPI_Comm comm, Duration timeout)
      : lib_(lib), comm_(comm), timeout_(timeout) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiBackend() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && broken_.empty()) {
      std::lock_guard<std::mutex> lock(lib_.mu());
      MPI_Comm_free(&comm_);
    }
  }

  const char* name() const override { return "mpi"; }

  Status Allreduce(const AllreduceArgs& args) override {
    HORA_RETURN_IF_ERROR(Usable("allreduce"));
    AllreducePrologue(args);  // out = in * prescale
    const MPI_Datatype type = lib_.Datatype(args.dtype);
    const MPI_Op op = lib_.Op(args.dtype, ReducingOp(args.reduction.op));
    const size_t esize = DataTypeSize(args.dtype);
    for (size_t off = 0; off < args.count; off += kMaxCount) {
      const int n = static_cast<int>(std::min(kMaxCount, args.count - off));
      auto* at = static_cast<char*>(args.out) + off * esize;
      HORA_RETURN_IF_ERROR(Run("allreduce", "MPI_Iallreduce", [&](MPI_Request* r) {
        return MPI_Iallreduce(MPI_IN_PLACE, at, n, type, op, comm_, r);
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
    return Run("allgather", "MPI_Iallgatherv", [&](MPI_Request* r) {
      return MPI_Iallgatherv(send, counts[static_cast<size_t>(rank_)], MPI_BYTE, out, counts.data(),
                             displs.data(), MPI_BYTE, comm_, r);
    });
  }

  Status Broadcast(void* data, size_t bytes, int root) override {
    HORA_RETURN_IF_ERROR(Usable("broadcast"));
    for (size_t off = 0; off < bytes; off += kMaxCount) {
      const int n = static_cast<int>(std::min(kMaxCount, bytes - off));
      HORA_RETURN_IF_ERROR(Run("broadcast", "MPI_Ibcast", [&](MPI_Request* r) {
        return MPI_Ibcast(static_cast<char*>(data) + off, n, MPI_BYTE, root, comm_, r);
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
    HORA_RETURN_IF_ERROR(Run("reducescatter", "MPI_Ireduce_scatter", [&](MPI_Request* r) {
      return MPI_Ireduce_scatter(in, out, recv.data(), type, op, comm_, r);
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
    return Run("alltoall", "MPI_Ialltoallv", [&](MPI_Request* r) {
      return MPI_Ialltoallv(in, scounts.data(), sdispls.data(), MPI_BYTE, out, rcounts.data(),
                            rdispls.data(), MPI_BYTE, comm_, r);
    });
  }

  Status Barrier() override {
    HORA_RETURN_IF_ERROR(Usable("barrier"));
    return Run("barrier", "MPI_Ibarrier", [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); });
  }

 private:
  std::string Where(const char* op) const {
    return "rank " + std::to_string(rank_) + ": " + op + " (mpi)";
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

  // Starts one nonblocking collective and tests it until done or the timeout.
  template <typename Start>
  Status Run(const char* op, const char* call, Start&& start) {
    MPI_Request r = MPI_REQUEST_NULL;
    int rc;
    {
      std::lock_guard<std::mutex> lock(lib_.mu());
      rc = start(&r);
    }
    if (rc != MPI_SUCCESS)
      return UnavailableError(Where(op) + ": " + call + ": " + MpiErrorString(rc));
    const TimePoint deadline = Clock::now() + timeout_;
    for (int spins = 0;; ++spins) {
      int flag = 0;
      {
        std::lock_guard<std::mutex> lock(lib_.mu());
        rc = MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
      }
      if (rc != MPI_SUCCESS) {
        broken_ = std::string(call) + " failed";
        return UnavailableError(Where(op) + ": " + call + ": " + MpiErrorString(rc));
      }
      if (flag) return Status::Ok();
      if (Clock::now() >= deadline) {
        broken_ = std::string(call) + " timed out";
        char secs[32];
        std::snprintf(secs, sizeof secs, "%g", DurationToSeconds(timeout_));
        return TimeoutError(Where(op) + ": timed out after " + secs + " s (HORA_TIMEOUT_S) in " +
                            call +
                            "; a rank did not join it. MPI cannot cancel a started collective, "
                            "so this session runs no more collectives");
      }
      if (spins > 256) std::this_thread::yield();
    }
  }

  Library& lib_;
  MPI_Comm comm_;
  const Duration timeout_;
  int rank_ = 0;
  int size_ = 1;
  std::string broken_;  // why the backend is unusable; empty while it works
};

}  // namespace

Result<std::unique_ptr<CollectiveBackend>> Library::CreateBackend(Duration timeout) {
  HORA_ASSIGN_OR_RETURN(MPI_Comm comm, DupWorld("backend"));
  return std::unique_ptr<CollectiveBackend>(new MpiBackend(*this, comm, timeout));
}

}  // namespace hora::mpi
