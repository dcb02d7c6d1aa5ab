// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// hora-bench's command line (see main.cc for the usage text).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hora/status.h"
#include "hora/types.h"

namespace hora::bench {

enum class Collective { kAllreduce, kAllgather, kBroadcast, kAlltoall, kReducescatter };

const char* CollectiveName(Collective c);

struct Args {
  Collective collective = Collective::kAllreduce;
  uint64_t min_bytes = 4, max_bytes = 64ull << 20;
  int step_factor = 2;  // sizes grow by this factor
  int iters = 20, warmup = 5;
  // Iterations at sizes of at most kSmallBytes (as OSU's benchmarks: more
  // for small messages, whose median a moment's disturbance moves); 0: iters.
  int iters_small = 0;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  std::string algo;  // Hora's algorithm (HORA_ALLREDUCE_ALGO / HORA_BROADCAST_ALGO), "" = model
  bool inplace = false;
  bool check = false;
  int root = 0;                    // broadcast
  std::vector<std::string> peers;  // mpi, gloo, torch, nccl
  std::string device;              // "", host or cuda: Hora on GPU tensors too
  std::string json_path;
  std::string python = "/usr/bin/python3";  // the torch peer's interpreter
};

extern const char kUsage[];

// The largest size --iters-small applies to.
inline constexpr uint64_t kSmallBytes = 64 << 10;

// Timed iterations at `bytes`.
inline int Iterations(const Args& a, uint64_t bytes) {
  return bytes <= kSmallBytes && a.iters_small > 0 ? a.iters_small : a.iters;
}

// Parses argv (argv[1] is the collective). The error names the flag and value.
Result<Args> ParseArgs(int argc, char** argv);

}  // namespace hora::bench
