// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// hora-bench's results: one Record per (implementation, collective, size),
// printed as an nccl-tests style table and written as a JSON list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "args.h"

namespace hora::bench {

struct Record {
  std::string impl, collective, dtype, op, algo;
  int ranks = 0;
  int iters = 0;  // timed iterations
  bool inplace = false;
  uint64_t size_bytes = 0, count = 0;
  double avg_us = 0, p50_us = 0, p99_us = 0, algbw_gbps = 0, busbw_gbps = 0;
  long wrong = -1;    // -1: not checked
  std::string error;  // set when the implementation could not run this
  std::string limit_kind;
  double limit_gbps = 0;
};

// Average, median and 99th percentile of per-iteration times (microseconds).
struct Times {
  double avg = 0, p50 = 0, p99 = 0;
};
Times Summarize(std::vector<double> us);

void PrintHeader(const Args& args, int ranks, const std::string& limit_line);
void PrintRow(const Record& r);
// Per size: Hora's busbw, the best peer's and their ratio (> 1: Hora faster).
void PrintComparison(const std::vector<Record>& records);

// Parses the torch peer's JSON list (the same fields) into records.
Result<std::vector<Record>> RecordsFromJson(const std::string& text);
Status WriteJson(const std::string& path, const std::vector<Record>& records);

}  // namespace hora::bench
