// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Wait() and Progress() test the pending MPI requests and complete Hora's.
//
// Tags. Hora's tags are 64 bits (context, call sequence, phase, step,
// segment: tag_layout.h); MPI guarantees only 15 and usually gives 31. The transport packs
// the context and phase whole and the low bits of segment, step and sequence
// into the tag bits MPI offers. Two messages whose tags then coincide are still
// matched correctly: MPI never reorders messages between a pair with one tag
// on one communicator, and Hora's algorithms post the receives of a pair in
// the order its sends are made (segments and steps in increasing order,
// calls one after another).
//
// Messages over 1 GiB travel as several MPI messages (MPI counts are int).
// A receive that gets fewer bytes than asked fails with both sizes; MPI
// cannot tell the sender, whose send completes.
#include "transport/mpi/mpi_transport.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <thread>
#include <vector>

#include "transport/mpi/mpi_error.h"
#include "transport/tag_layout.h"

namespace hora::mpi {
namespace {

constexpr size_t kChunk = size_t{1} << 30;

class MpiTransport final : public Transport {
 public:
  MpiTransport(MPI_Comm comm, Mutex& mpi_mu, int tag_bits) : mpi_mu_(mpi_mu), comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // What is left after the context and the phase, shared out.
    const int rest = tag_bits - tag_layout::kContextBits - tag_layout::kPhaseBits;
    seg_bits_ = rest * 10 / 27;
    step_bits_ = rest * 9 / 27;
    seq_bits_ = rest - seg_bits_ - step_bits_;
  }

  ~MpiTransport() override {
    std::vector<Request> left;
    {
      MutexLock pending_lock(mu_);
      for (auto& p : pending_) left.push_back(p.state);
    }
    for (auto& r : left) Cancel(r);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      MutexLock lock(mpi_mu_);
      MPI_Comm_free(&comm_);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "mpi"; }

  Request Isend(int peer, Tag tag, const void* data, size_t bytes) override {
    return Post(true, peer, tag, const_cast<void*>(data), bytes, nullptr, 0, nullptr);
  }

  Request Irecv(int peer, Tag tag, void* data, size_t bytes) override {
    return Post(false, peer, tag, data, bytes, nullptr, 0, nullptr);
  }

  Request IrecvReduce(int peer, Tag tag, void* dst, size_t count, const ReduceSpec& spec) override {
    const size_t bytes = count * DataTypeSize(spec.dtype);
    return Post(false, peer, tag, nullptr, bytes, dst, count, &spec);
  }

  void Cancel(const Request& request) override HORA_EXCLUDES(mu_) {
    MutexLock pending_lock(mu_);
    auto it = Find(request);
    if (it == pending_.end()) return;
    {
      MutexLock lock(mpi_mu_);
      for (MPI_Request& r : it->reqs) {
        if (r == MPI_REQUEST_NULL) continue;
        MPI_Cancel(&r);
        if (!it->is_send) {
          MPI_Wait(&r, MPI_STATUS_IGNORE);  // a cancelled receive completes at once
          continue;
        }
        // MPI may be unable to cancel a send whose receiver never posts;
        // give it a moment, then let MPI finish it on its own.
        int flag = 0;
        for (int i = 0; i < 1000 && !flag; ++i) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        if (!flag) MPI_Request_free(&r);
      }
    }
    request->Complete(AbortedError("cancelled " + request->Describe()));
    pending_.erase(it);
  }

  Status Wait(const Request& request, TimePoint deadline) override {
    for (int spins = 0;; ++spins) {
      if (request->done()) return request->status();
      Progress();
      if (request->done()) return request->status();
      if (Clock::now() >= deadline) return request->Wait(deadline);  // the usual timeout message
      if (spins > 256) std::this_thread::yield();
    }
  }

  bool Progress() override HORA_EXCLUDES(mu_) {
    if (!mu_.try_lock()) return false;  // another thread is at it
    MutexLock pending_lock(mu_, std::adopt_lock);
    if (pending_.empty()) return false;
    bool moved = false;
    for (size_t i = 0; i < pending_.size();) {
      if (TestOne(pending_[i])) {
        moved = true;
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    return moved;
  }

 private:
  struct Pending {
    Request state;
    bool is_send = false;
    std::vector<MPI_Request> reqs;
    std::vector<size_t> chunk_bytes;
    // IrecvReduce: received into `staging`, then folded into `dst`.
    std::unique_ptr<std::byte[]> staging;
    void* dst = nullptr;
    size_t count = 0;
    ReduceSpec spec{};
  };

  int MpiTag(Tag tag) const {
    using namespace tag_layout;
    const uint64_t seg = tag & kSegmentMask, step = (tag >> kStepShift) & kStepMask,
                   phase = (tag >> kPhaseShift) & kPhaseMask,
                   seq = (tag >> kSequenceShift) & kSequenceMask, context = tag >> kContextShift;
    const auto low = [](uint64_t v, int bits) { return v & ((uint64_t{1} << bits) - 1); };
    uint64_t t = (context << kPhaseBits) | phase;
    t = (t << seq_bits_) | low(seq, seq_bits_);
    t = (t << step_bits_) | low(step, step_bits_);
    t = (t << seg_bits_) | low(seg, seg_bits_);
    return static_cast<int>(t);
  }

  Request Post(bool is_send, int peer, Tag tag, void* data, size_t bytes, void* reduce_dst,
               size_t count, const ReduceSpec* spec) HORA_EXCLUDES(mu_) {
    auto state = std::make_shared<RequestState>(is_send, peer, bytes);
    if (peer < 0 || peer >= size_ || peer == rank_) {
      state->Complete(InvalidPeerError(rank_, peer, size_));
      return state;
    }
    Pending p;
    p.state = state;
    p.is_send = is_send;
    if (spec != nullptr) {
      p.staging.reset(new std::byte[std::max<size_t>(bytes, 1)]);
      data = p.staging.get();
      p.dst = reduce_dst;
      p.count = count;
      p.spec = *spec;
    }
    const int mpi_tag = MpiTag(tag);
    size_t off = 0;
    MutexLock pending_lock(mu_);  // before mpi_mu_
    MutexLock lock(mpi_mu_);
    do {
      const size_t n = std::min(kChunk, bytes - off);
      MPI_Request r = MPI_REQUEST_NULL;
      auto* at = static_cast<char*>(data) + off;
      const int rc = is_send
                         ? MPI_Isend(at, static_cast<int>(n), MPI_BYTE, peer, mpi_tag, comm_, &r)
                         : MPI_Irecv(at, static_cast<int>(n), MPI_BYTE, peer, mpi_tag, comm_, &r);
      if (rc != MPI_SUCCESS) {
        for (MPI_Request& done : p.reqs) MPI_Request_free(&done);
        state->Complete(UnavailableError("rank " + std::to_string(rank_) + ": " +
                                         (is_send ? "MPI_Isend" : "MPI_Irecv") + " " +
                                         state->Describe() + ": " + MpiErrorString(rc)));
        return state;
      }
      p.reqs.push_back(r);
      p.chunk_bytes.push_back(n);
      off += n;
    } while (off < bytes);
    pending_.push_back(std::move(p));
    return state;
  }

  // Tests one pending request (of pending_); completes it and returns true
  // when done.
  bool TestOne(Pending& p) HORA_REQUIRES(mu_) {
    MPI_Status one[1];
    std::vector<MPI_Status> many;
    std::span<MPI_Status> statuses(one);
    if (p.reqs.size() > 1) {
      many.resize(p.reqs.size());
      statuses = many;
    }
    int flag = 0;
    int rc;
    {
      MutexLock lock(mpi_mu_);
      rc = MPI_Testall(static_cast<int>(p.reqs.size()), p.reqs.data(), &flag, statuses.data());
    }
    if (rc == MPI_SUCCESS && !flag) return false;
    Status st = Status::Ok();
    if (rc != MPI_SUCCESS) {
      // MPI_ERR_IN_STATUS: the per-request codes say which failed.
      int code = rc;
      for (const MPI_Status& s : statuses)
        if (s.MPI_ERROR != MPI_SUCCESS) code = s.MPI_ERROR;
      char text[MPI_MAX_ERROR_STRING] = {};
      int len = 0;
      int cls = 0;
      MPI_Error_class(code, &cls);
      MPI_Error_string(code, text, &len);
      std::string why(text, static_cast<size_t>(len));
      if (cls == MPI_ERR_TRUNCATE) {
        why = "the peer sent more than the " + std::to_string(p.state->bytes()) + " bytes expected";
      }
      st = MismatchError("rank " + std::to_string(rank_) + ": " + p.state->Describe() + ": " + why);
      MutexLock lock(mpi_mu_);
      for (MPI_Request& r : p.reqs)
        if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    } else if (!p.is_send) {
      size_t got = 0;
      for (size_t i = 0; i < statuses.size(); ++i) {
        int n = 0;
        MPI_Get_count(&statuses[i], MPI_BYTE, &n);
        got += static_cast<size_t>(n);
      }
      if (got != p.state->bytes()) {
        st = MismatchError("rank " + std::to_string(rank_) + ": size mismatch " +
                           p.state->Describe() + ": the peer sent " + std::to_string(got) +
                           " bytes, " + std::to_string(p.state->bytes()) + " expected");
      } else if (p.staging != nullptr) {
        p.spec.reduce(p.spec.dtype, p.spec.op, p.dst, p.staging.get(), p.count);
      }
    }
    p.state->Complete(std::move(st));
    return true;
  }

  std::vector<Pending>::iterator Find(const Request& r) HORA_REQUIRES(mu_) {
    return std::find_if(pending_.begin(), pending_.end(),
                        [&](const Pending& p) { return p.state == r; });
  }

  Mutex& mpi_mu_;
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  int seg_bits_ = 0, step_bits_ = 0, seq_bits_ = 0;
  // Requests not yet complete; several threads may post and progress.
  Mutex mu_;  // taken before mpi_mu_
  std::vector<Pending> pending_ HORA_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<Transport> NewMpiTransport(MPI_Comm comm, Mutex& mpi_mu, int tag_bits) {
  return std::make_unique<MpiTransport>(comm, mpi_mu, tag_bits);
}

}  // namespace hora::mpi
