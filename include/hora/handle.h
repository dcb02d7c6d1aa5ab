// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Handle: the result of a collective submitted to a Session's engine
// (Session::AllreduceAsync and friends). It completes exactly once, from the
// engine's thread or a thread waiting on a handle (which runs the engine's
// cycles itself), or at once in the caller when the call fails its checks, with OK or an error that
// names the tensor, the ranks and the values involved (a mismatch between ranks fails the tensor on
// every rank; the job and its other tensors go on).
//
//   hora::Handle h = session->AllreduceAsync("grad.fc1", view, view, {hora::ReduceOp::kAverage});
//   ... more work ...
//   hora::Status st = h.Wait(std::chrono::seconds(30));
//
// Copies share the same completion. The tensors given at submission must stay
// valid and unchanged (outputs untouched) until the handle is done.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "hora/status.h"
#include "hora/tensor.h"

namespace hora {

class Handle {
 public:
  Handle() = default;  // an empty handle: Poll() is true, status() an error

  // True once the collective finished (successfully or not), GPU tensors'
  // results copied back included. Never blocks.
  bool Poll() const;
  // Waits about `timeout` (one engine cycle more at most) for completion,
  // GPU tensors' copies included
  // (failed or not). Returns the collective's status, or a Timeout error if
  // it is still running (the handle stays valid).
  Status Wait(std::chrono::nanoseconds timeout) const;
  // GPU tensors (Horovod's async completion): waits as Wait does, except
  // for the last copies of the results to the GPU. Those, `stream` (a
  // cudaStream_t of the tensors' GPU; 0 is the legacy default stream) waits
  // for instead, so that later work queued on it reads the results; the
  // host does not wait for them. The tensors must then stay valid until
  // Poll() is true, or be freed in that stream's order (as a framework's
  // caching allocator does). Host tensors: the same as Wait.
  Status StreamWait(uint64_t stream, std::chrono::nanoseconds timeout) const;
  // True once the engine finished the collective, even if GPU tensors'
  // results are still on their way (Poll() says when they are there).
  bool Finished() const;
  // The result once Poll() is true.
  Status status() const;
  // Collectives whose output Hora allocates (allgather, reducescatter,
  // alltoall): the output tensor,
  // once done successfully; null otherwise.
  const Tensor* output() const;
  // The same tensor, moved out of the handle (output() is null after): once
  // done successfully, nullopt otherwise. Not while another thread reads
  // output() of this handle.
  std::optional<Tensor> TakeOutput();
  // Alltoall: the rows received from each rank, once done; null otherwise.
  const std::vector<int64_t>* received_splits() const;

  // Copies share the completion: the last one gone frees it.
  Handle(const Handle& other);
  Handle(Handle&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  Handle& operator=(const Handle& other);
  Handle& operator=(Handle&& other) noexcept;
  ~Handle();

  // The engine's side (the completion is not part of the API).
  struct State;
  explicit Handle(State* state);  // a new holder of `state`
  State* state() const { return state_; }

 private:
  State* state_ = nullptr;
};

}  // namespace hora
