// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The outputs the engine allocates (allgather, reducescatter, alltoall)
// come from the Session's output pool: once an output is destroyed, the
// next one of its size takes its memory (outputs_reused), while one still
// alive keeps its own (outputs_fresh). Values are checked against ones
// computed here, on every call, ranks as threads.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>

#include "support/thread_ranks.h"

namespace hora {
namespace {

using testing::ExpectAllOk;
using testing::TestSettings;
using testing::ThreadRanks;

constexpr auto kWait = std::chrono::seconds(60);
constexpr int64_t kRows = 8192;  // rows of 3 floats: 96 KiB, a pooled size
constexpr int64_t kCols = 3;

// Element k of rank r's input at call c.
float Value(int r, int64_t k, int c) { return static_cast<float>(r * 7 + (k % 1000) + c * 3); }

struct Case {
  const char* name;
  bool in_parts;   // the input has a part per rank (else one part)
  bool out_parts;  // the output has a part per rank (else one part)
  // Starts the collective on `v`.
  std::function<Handle(Session&, const std::string&, const TensorView&)> start;
  // Element k of the output that rank `rank` of `n` expects at call c.
  std::function<float(int rank, int n, int64_t k, int c)> want;
};

std::vector<Case> Cases() {
  const int64_t part = kRows * kCols;  // elements of one rank's part
  return {
      {"allgather", false, true,
       [](Session& s, const std::string& name, const TensorView& v) {
         return s.AllgatherAsync(name, v);
       },
       [part](int, int, int64_t k, int c) {
         return Value(static_cast<int>(k / part), k % part, c);
       }},
      {"reducescatter", true, false,
       [](Session& s, const std::string& name, const TensorView& v) {
         return s.ReducescatterAsync(name, v, {ReduceOp::kSum});
       },
       [part](int rank, int n, int64_t k, int c) {
         float sum = 0;
         for (int p = 0; p < n; ++p) sum += Value(p, rank * part + k, c);
         return sum;
       }},
      {"alltoall", true, true,
       [](Session& s, const std::string& name, const TensorView& v) {
         return s.AlltoallAsync(name, v);
       },
       [part](int rank, int, int64_t k, int c) {
         // Part p of the output is rank p's part `rank`.
         return Value(static_cast<int>(k / part), rank * part + k % part, c);
       }},
  };
}

Status Check(const Handle& h, const Case& cs, int rank, int n, int c) {
  const Tensor* out = h.output();
  if (out == nullptr) return InternalError(std::string(cs.name) + ": no output");
  const int64_t want_elements = (cs.out_parts ? n : 1) * kRows * kCols;
  if (static_cast<int64_t>(out->num_elements()) != want_elements) {
    return InternalError(std::string(cs.name) + ": " + std::to_string(out->num_elements()) +
                         " elements, expected " + std::to_string(want_elements));
  }
  const auto* got = static_cast<const float*>(out->data());
  for (int64_t k = 0; k < want_elements; ++k) {
    const float want = cs.want(rank, n, k, c);
    if (got[k] != want) {
      return InternalError(std::string(cs.name) + " call " + std::to_string(c) + ": element " +
                           std::to_string(k) + " is " + std::to_string(got[k]) + ", expected " +
                           std::to_string(want));
    }
  }
  return Status::Ok();
}

class EngineOutputPool : public ::testing::TestWithParam<int> {};

TEST_P(EngineOutputPool, OutputsTakeTheMemoryOfFreedOnesAndNotOfLiveOnes) {
  const int n = GetParam();
  ThreadRanks ranks(n, TestSettings());
  ExpectAllOk(ranks.Run([&](int rank, Session& s) -> Status {
    int call = 0;
    // Outputs kept alive to the end, so that each case starts with no idle
    // memory in the pool.
    std::vector<Handle> alive;
    for (const Case& cs : Cases()) {
      const int64_t rows = (cs.in_parts ? n : 1) * kRows;
      std::vector<float> in(static_cast<size_t>(rows * kCols));
      auto run = [&](const std::string& name) -> Result<Handle> {
        for (size_t k = 0; k < in.size(); ++k) in[k] = Value(rank, static_cast<int64_t>(k), call);
        Handle h = cs.start(s, name, TensorView(in.data(), DataType::kFloat32, {rows, kCols}));
        HORA_RETURN_IF_ERROR(h.Wait(kWait));
        HORA_RETURN_IF_ERROR(Check(h, cs, rank, n, call));
        ++call;
        return h;
      };
      const std::string what = std::string(cs.name) + " at world size " + std::to_string(n);
      // First call, its output freed: the second takes its memory.
      const void* first = nullptr;
      {
        HORA_ASSIGN_OR_RETURN(Handle h, run(std::string(cs.name) + ".0"));
        first = h.output()->data();
      }
      const Session::EngineCounters before = s.engine_counters();
      HORA_ASSIGN_OR_RETURN(Handle second, run(std::string(cs.name) + ".1"));
      const Session::EngineCounters after = s.engine_counters();
      if (after.outputs_reused != before.outputs_reused + 1 ||
          after.outputs_fresh != before.outputs_fresh || second.output()->data() != first) {
        return InternalError(what + ": the second output did not take the freed first's memory");
      }
      // The second still alive: the third gets fresh memory of its own.
      HORA_ASSIGN_OR_RETURN(Handle third, run(std::string(cs.name) + ".2"));
      const Session::EngineCounters last = s.engine_counters();
      if (last.outputs_fresh != after.outputs_fresh + 1 ||
          third.output()->data() == second.output()->data()) {
        return InternalError(what + ": the third output shares the live second's memory");
      }
      HORA_RETURN_IF_ERROR(Check(second, cs, rank, n, call - 2));  // untouched by the third
      alive.push_back(std::move(second));
      alive.push_back(std::move(third));
    }
    return Status::Ok();
  }));
}

INSTANTIATE_TEST_SUITE_P(Worlds, EngineOutputPool, ::testing::Values(1, 2, 3, 4));

}  // namespace
}  // namespace hora
