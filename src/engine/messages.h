// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// What the engine's ranks tell each other (docs/dev/design.md §4, §5): the parameters
// of a submitted tensor (RequestMeta), and the coordinator's decisions
// (Response). Both travel as small binary records: a version byte, then
// fields with explicit lengths; decoding checks every length and count
// before use and fails with a message rather than reading past the end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hora/status.h"
#include "hora/tensor.h"
#include "hora/types.h"

namespace hora {

enum class OpType : uint8_t {
  kAllreduce = 0,
  kBroadcast = 1,
  kBarrier = 2,
  kAllgather = 3,  // dimension 0 may differ between ranks
  kReducescatter = 4,
  kAlltoall = 5,  // each rank's splits may differ
  kJoin = 6,      // this rank is out of data (see Coordinator)
};
inline constexpr int kOpTypeCount = 7;
const char* OpTypeName(OpType op);

// The longest tensor or group name the engine takes, in bytes: a request
// carrying a longer one would not decode on the other ranks.
inline constexpr size_t kMaxNameBytes = 64 * 1024;

// One tensor as one rank submitted it.
struct RequestMeta {
  std::string name;
  OpType op = OpType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  Reduction reduction;  // allreduce
  int32_t root = -1;    // broadcast
  // Where the tensor is: how it runs (the device backend's routing) is no
  // request's, but the Session's settings, which ranks agreed on.
  DeviceType device = DeviceType::kCPU;
  // False for tensors the caller did not name (their generated names never
  // repeat, so caching them would only evict useful entries).
  bool cacheable = true;
  // Grouped collectives: every member carries the group's name and size;
  // members run only together (the engine never runs part of a group).
  std::string group;
  uint32_t group_size = 0;
  // Alltoall: rows of dimension 0 sent to each rank, in rank order.
  std::vector<int64_t> splits;
  // A call its rank refused (its own checks failed: a bad output, split,
  // root...): the rank's error, sent so that every rank fails the
  // collective naming it, and unnamed calls stay in step; empty: not
  // refused. refused_code is that error's code, on its own rank only.
  std::string refused;
  StatusCode refused_code = StatusCode::kOk;

  // Everything ranks must agree on agrees: all but the name and cacheable;
  // for allgather and alltoall also but dimension 0 and the splits. (what ranks must agree on, and
  // what a cached entry is compared with).
  bool SameParams(const RequestMeta& other) const;
  // Takes every field of `from` but the name and the shape (an engine
  // record keeps its own: TensorRecords::Claim); false when one of them
  // differed.
  bool TakeAllButNameAndShape(RequestMeta&& from);
  // "float32[4, 3] sum" / "uint8[8] root 1" (for error messages).
  std::string DescribeParams() const;
  size_t num_bytes() const;
  size_t num_elements() const;  // product of the shape (1 for a scalar)
  size_t row_elements() const;  // elements per index of dimension 0
};

// The tensor as its user knows it: "allreduce 'grad.fc1.weight'", or, for
// a tensor the user did not name (its name was generated), "barrier".
std::string UserName(const RequestMeta& m);

// The coordinator's decision for one tensor: run it (error empty) or fail it
// on every rank with `error`. Responses are executed in list order.
struct Response {
  RequestMeta params;  // the agreed parameters (name included)
  std::string error;
  // Allgather: every rank's dimension 0. Alltoall: rows rank p sends to
  // rank q at [p * size + q]. Join: {rank that joined, 1 once every rank
  // has joined (the join is over), else 0}.
  std::vector<int64_t> rows;

  // Whether `mine`, submitted by `rank` of `size`, is what this decision
  // (a cached one) was made for: the same parameters and, for allgather and
  // alltoall, this rank's own dimension 0 and splits.
  bool Matches(const RequestMeta& mine, int rank, int size) const;
};

// Request and response lists to bytes and back, into `out`, whose capacity
// (and, decoding, whose elements' strings and vectors) is reused: the engine
// calls these every cycle, and its lists are not allocated and freed again
// every cycle. Decoding fails, naming the fault, on truncated, trailing or
// unknown-version input.
// A request list may say, per request, how long it already waited on the
// sending rank, in milliseconds (`waited_ms`; null: 0 each).
void EncodeRequests(const std::vector<RequestMeta>& requests, std::vector<uint8_t>* out,
                    const std::vector<uint32_t>* waited_ms = nullptr);
Status DecodeRequests(const uint8_t* data, size_t size, std::vector<RequestMeta>* out,
                      std::vector<uint32_t>* waited_ms = nullptr);
void EncodeResponses(const std::vector<Response>& responses, std::vector<uint8_t>* out);
Status DecodeResponses(const uint8_t* data, size_t size, std::vector<Response>* out);

}  // namespace hora
