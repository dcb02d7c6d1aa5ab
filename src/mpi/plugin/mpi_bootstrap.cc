// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The plugin's MpiBootstrap (mpi/mpi_plugin.h): a bounded MPI_Init and a
// bounded broadcast of a few bytes, for jobs that start under an MPI
// launcher without any other rendezvous.
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include "mpi/plugin/mpi_library.h"

namespace hora::mpi {
namespace {

std::string Seconds(Duration d) {
  return std::to_string(static_cast<long long>(DurationToSeconds(d) + 0.5)) + " s";
}

// Tests `request` until it completes or `deadline` passes, under the lock
// that serialises Hora's MPI calls. On timeout the request is left pending
// (MPI_Cancel does not apply to collectives): MPI is not usable for this
// job any more, and the caller fails.
Status TestUntil(Library& lib, MPI_Request* request, TimePoint deadline, const std::string& what) {
  for (;;) {
    int done = 0;
    int rc;
    {
      MutexLock lock(lib.mu());
      rc = MPI_Test(request, &done, MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS) return UnavailableError(what + " failed: " + MpiErrorString(rc));
    if (done) return Status::Ok();
    if (Clock::now() >= deadline) return TimeoutError(what + " did not finish in time");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

class Bootstrap final : public MpiBootstrap {
 public:
  Result<MpiLibrary*> Open(Duration timeout) override HORA_EXCLUDES(mu_) {
    std::shared_future<Library*> opened;
    {
      MutexLock lock(mu_);
      if (!started_) {
        // A thread of its own, left running if it outlasts the caller's
        // patience: MPI_Init cannot be interrupted.
        auto task = std::make_shared<std::packaged_task<Library*()>>([this] {
          std::string error;
          Library* lib = Library::Open(&error);
          MutexLock lock(mu_);
          error_ = error;
          return lib;
        });
        opened_ = task->get_future().share();
        std::thread([task] { (*task)(); }).detach();
        started_ = true;
      }
      opened = opened_;
    }
    if (timeout > Duration::zero() && opened.wait_for(timeout) != std::future_status::ready) {
      return TimeoutError("MPI_Init did not return within " + Seconds(timeout));
    }
    Library* lib = opened.get();
    if (lib == nullptr) {
      MutexLock lock(mu_);
      return UnavailableError(error_);
    }
    lib_.store(lib);
    return static_cast<MpiLibrary*>(lib);
  }

  Status Broadcast(std::string* bytes, int root, Duration timeout) override
      HORA_EXCLUDES(call_mu_) {
    if (lib_.load() == nullptr) return UnavailableError("MPI bootstrap: Broadcast before Open");
    Library& lib = *lib_.load();
    MutexLock call(call_mu_);
    if (!abandoned_.empty()) {
      return UnavailableError("MPI bootstrap: not usable after an earlier failure (" + abandoned_ +
                              "); MPI is not usable in this process any more");
    }
    const TimePoint deadline =
        DeadlineAfter(Clock::now(), timeout > Duration::zero() ? timeout : Duration::max());
    const std::string me = "rank " + std::to_string(lib.rank()) + ": ";
    if (lib.rank() == root && bytes->size() > kMpiBootstrapMaxBytes) {
      return InvalidArgument(me + "MPI bootstrap message of " + std::to_string(bytes->size()) +
                             " bytes is over " + std::to_string(kMpiBootstrapMaxBytes));
    }
    {
      MutexLock lock(lib.mu());
      const int rc = MPI_Comm_idup(MPI_COMM_WORLD, &comm_, &request_);
      if (rc != MPI_SUCCESS) return UnavailableError(me + "MPI_Comm_idup: " + MpiErrorString(rc));
    }
    Status st = TestUntil(lib, &request_, deadline, me + "MPI_Comm_idup of MPI_COMM_WORLD");
    if (!st.ok()) return Abandon(lib, st);
    {
      MutexLock lock(lib.mu());
      MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    }
    // A fixed size, so that no rank needs the length first: 4 bytes of
    // length (little-endian), then the bytes.
    buffer_.assign(4 + kMpiBootstrapMaxBytes, '\0');
    if (lib.rank() == root) {
      const uint32_t n = static_cast<uint32_t>(bytes->size());
      for (size_t i = 0; i < 4; ++i) buffer_[i] = static_cast<char>(n >> (8 * i));
      std::memcpy(buffer_.data() + 4, bytes->data(), bytes->size());
    }
    {
      MutexLock lock(lib.mu());
      const int rc = MPI_Ibcast(buffer_.data(), static_cast<int>(buffer_.size()), MPI_BYTE, root,
                                comm_, &request_);
      if (rc != MPI_SUCCESS) return UnavailableError(me + "MPI_Ibcast: " + MpiErrorString(rc));
    }
    st = TestUntil(lib, &request_, deadline,
                   me + "MPI_Ibcast from rank " + std::to_string(root) + " of MPI_COMM_WORLD");
    if (!st.ok()) return Abandon(lib, st);
    {
      MutexLock lock(lib.mu());
      MPI_Comm_free(&comm_);
    }
    uint32_t n = 0;
    for (size_t i = 0; i < 4; ++i)
      n |= static_cast<uint32_t>(static_cast<unsigned char>(buffer_[i])) << (8 * i);
    if (n > kMpiBootstrapMaxBytes) return UnavailableError(me + "MPI bootstrap message corrupt");
    bytes->assign(buffer_.data() + 4, n);
    return Status::Ok();
  }

  bool thread_multiple() const override {
    int initialized = 0, finalized = 0, provided = MPI_THREAD_SINGLE;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized) return false;
    MPI_Query_thread(&provided);
    return provided == MPI_THREAD_MULTIPLE;
  }

 private:
  Mutex mu_;
  bool started_ HORA_GUARDED_BY(mu_) = false;
  std::shared_future<Library*> opened_ HORA_GUARDED_BY(mu_);
  std::string error_ HORA_GUARDED_BY(mu_);
  std::atomic<Library*> lib_{nullptr};  // once Open has succeeded

  // A request that did not finish in time stays pending (MPI_Cancel does
  // not apply to collectives) and MPI may still write to what it was given:
  // comm_ (MPI_Comm_idup's result), request_ and buffer_ (MPI_Ibcast's). So
  // they are members of this object, which is never freed, and the first
  // failure abandons them for good: no later Broadcast reuses them, and MPI
  // is not finalised at exit (Library::AbandonRequests), since
  // MPI_Finalize would wait for, or progress, a collective that the other
  // ranks may never join.
  Status Abandon(Library& lib, const Status& why) HORA_REQUIRES(call_mu_) {
    abandoned_ = why.message();
    lib.AbandonRequests();
    return why;
  }

  Mutex call_mu_;  // one Broadcast at a time
  MPI_Comm comm_ HORA_GUARDED_BY(call_mu_) = MPI_COMM_NULL;
  MPI_Request request_ HORA_GUARDED_BY(call_mu_) = MPI_REQUEST_NULL;
  std::string buffer_ HORA_GUARDED_BY(call_mu_);
  std::string abandoned_ HORA_GUARDED_BY(call_mu_);  // why, once a request was abandoned
};

}  // namespace
}  // namespace hora::mpi

// The plugin's second exported symbol (mpi_plugin.h).
extern "C" __attribute__((visibility("default"))) hora::MpiBootstrap* hora_mpi_plugin_bootstrap(
    int version, std::string* error) {
  if (version != hora::kMpiBootstrapVersion) {
    *error = "MPI bootstrap interface version " + std::to_string(version) +
             " is not the plugin's " + std::to_string(hora::kMpiBootstrapVersion) +
             " (stale build?)";
    return nullptr;
  }
  static hora::mpi::Bootstrap* bootstrap = new hora::mpi::Bootstrap();
  return bootstrap;
}
