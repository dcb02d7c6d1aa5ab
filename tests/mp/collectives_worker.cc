// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// One rank of a multi-process test, started by horarun (or mpirun): runs
// every collective through a process-mode Session and checks each result
// against a reference computed here from every rank's (deterministic) input.
// Prints "rank R: N checks passed" and exits 0, or names the first failure
// and exits 1.
//
//   hora-mp-worker                 all collectives
//   hora-mp-worker --die-at ITER   the last rank SIGKILLs itself during
//                                  allreduce number ITER; the others must see
//                                  an error naming it (exit 3 when they do)
//   hora-mp-worker --stall-at ITER the last rank sleeps 300 s there instead
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "hora/hora.h"
#include "launch/slurm.h"
#include "support/die_at.h"
#include "support/reference.h"

namespace {

using namespace hora;
using hora::testing::Compare;
using hora::testing::FillInput;
using hora::testing::ReferenceAllreduce;

int g_checks = 0;

#define CHECK_OK(st, what)                                                                     \
  do {                                                                                         \
    Status _s = (st);                                                                          \
    if (!_s.ok()) {                                                                            \
      std::fprintf(stderr, "FAIL %s: %s\n", std::string(what).c_str(), _s.ToString().c_str()); \
      return 1;                                                                                \
    }                                                                                          \
  } while (0)

#define CHECK_TRUE(cond, what)                                      \
  do {                                                              \
    if (!(cond)) {                                                  \
      std::fprintf(stderr, "FAIL %s\n", std::string(what).c_str()); \
      return 1;                                                     \
    }                                                               \
    ++g_checks;                                                     \
  } while (0)

int AllreduceChecks(Session& s, const char* algo) {
  const int n = s.size();
  for (DataType dtype :
       {DataType::kFloat32, DataType::kInt32, DataType::kBFloat16, DataType::kFloat64}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{1031}, size_t{1} << 20}) {
        const size_t esize = DataTypeSize(dtype);
        std::vector<std::vector<uint8_t>> in(static_cast<size_t>(n),
                                             std::vector<uint8_t>(count * esize));
        std::vector<const void*> ptrs;
        for (int r = 0; r < n; ++r) {
          FillInput(dtype, op, in[static_cast<size_t>(r)].data(), count, count + 11, r);
          ptrs.push_back(in[static_cast<size_t>(r)].data());
        }
        const Reduction red{op, 1.0, 1.0};
        auto expected = ReferenceAllreduce(dtype, red, ptrs, count);
        std::vector<uint8_t> out(count * esize);
        auto& mine = in[static_cast<size_t>(s.rank())];
        const std::string what = std::string("allreduce ") + algo + " " + DataTypeName(dtype) +
                                 " " + ReduceOpName(op) + " count " + std::to_string(count);
        CHECK_OK(s.Allreduce(TensorView::Flat(mine.data(), dtype, count),
                             TensorView::Flat(out.data(), dtype, count), red),
                 what);
        const std::string diff = Compare(expected, out.data(), 0, count);
        CHECK_TRUE(diff.empty(), what + ": " + diff);
      }
    }
  }
  return 0;
}

int OtherChecks(Session& s) {
  const int n = s.size(), me = s.rank();
  // Allgather with uneven dim 0.
  std::vector<int32_t> mine(static_cast<size_t>(me + 1) * 3);
  std::iota(mine.begin(), mine.end(), me * 1000);
  auto gathered = s.Allgather(TensorView(mine.data(), DataType::kInt32, {me + 1, 3}));
  CHECK_OK(gathered.status(), "allgather");
  std::vector<int32_t> want;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < (r + 1) * 3; ++i) want.push_back(r * 1000 + i);
  CHECK_TRUE(gathered->num_bytes() == want.size() * 4 &&
                 std::memcmp(gathered->data(), want.data(), want.size() * 4) == 0,
             "allgather values");
  // Broadcast from the last rank, small and large.
  for (size_t bytes : {size_t{8}, size_t{3} << 20}) {
    std::vector<uint8_t> b(bytes, static_cast<uint8_t>(me));
    CHECK_OK(s.Broadcast(TensorView::Flat(b.data(), DataType::kUInt8, bytes), n - 1), "broadcast");
    CHECK_TRUE(std::all_of(b.begin(), b.end(), [&](uint8_t v) { return v == n - 1; }),
               "broadcast values");
  }
  // Reducescatter: every rank contributes ones; each row sums to n.
  std::vector<float> ones(static_cast<size_t>(n * 2 + 1) * 4, 1.0f);
  auto rs = s.Reducescatter(TensorView(ones.data(), DataType::kFloat32, {n * 2 + 1, 4}));
  CHECK_OK(rs.status(), "reducescatter");
  const auto* rv = static_cast<const float*>(rs->data());
  bool rs_ok = rs->shape()[0] == 2 + (me < 1 ? 1 : 0);
  for (size_t i = 0; i < rs->num_elements(); ++i) rs_ok = rs_ok && rv[i] == static_cast<float>(n);
  CHECK_TRUE(rs_ok, "reducescatter values");
  // Alltoall: rank r sends r+1 rows of value r*100+p to rank p.
  std::vector<int64_t> splits(static_cast<size_t>(n), me + 1), payload;
  for (int p = 0; p < n; ++p)
    for (int i = 0; i <= me; ++i) payload.push_back(me * 100 + p);
  std::vector<int64_t> received;
  auto a2a = s.Alltoall(TensorView::Flat(payload.data(), DataType::kInt64, payload.size()), splits,
                        &received);
  CHECK_OK(a2a.status(), "alltoall");
  std::vector<int64_t> want_a2a;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i <= r; ++i) want_a2a.push_back(r * 100 + me);
  CHECK_TRUE(a2a->num_bytes() == want_a2a.size() * 8 &&
                 std::memcmp(a2a->data(), want_a2a.data(), want_a2a.size() * 8) == 0,
             "alltoall values");
  CHECK_OK(s.Barrier(), "barrier");
  return 0;
}

// `stall`: the last rank sleeps instead of dying (it stays alive and silent).
int DieAt(Session& s, int iteration, bool stall) {
  std::vector<float> x(1 << 16, 1.0f);
  const TensorView v = TensorView::Flat(x.data(), DataType::kFloat32, x.size());
  return hora::testing::DieAt(s, iteration, stall,
                              [&] { return s.Allreduce(v, v, {ReduceOp::kAverage}); });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0)) {
    std::printf(
        "usage: hora-mp-worker [--die-at STEP | --stall-at STEP]\n"
        "One rank of the collectives' multi-process test; run it under horarun (or mpirun).\n"
        "--die-at STEP: a rank dies at STEP; --stall-at STEP: a rank stops submitting there.\n");
    return 0;
  }
  auto session = Session::Create({});
  if (!session.ok()) {
    std::fprintf(stderr, "FAIL Session::Create: %s\n", session.status().ToString().c_str());
    return 1;
  }
  Session& s = **session;
  if (argc == 3 && std::strcmp(argv[1], "--die-at") == 0) {
    return DieAt(s, std::atoi(argv[2]), false);
  }
  if (argc == 3 && std::strcmp(argv[1], "--stall-at") == 0) {
    return DieAt(s, std::atoi(argv[2]), true);
  }
  std::printf("rank %d layout: size %d local %d/%d cross %d/%d\n", s.rank(), s.size(),
              s.local_rank(), s.local_size(), s.cross_rank(), s.cross_size());
  std::fflush(stdout);
  int extra_port = 0;
  for (const char* algo : {"ring", "recursive_doubling", "halving_doubling"}) {
    // The selector reads HORA_ALLREDUCE_ALGO at Session creation: one Session per algorithm.
    SessionOptions o;
    o.settings = {
        {"HORA_ALLREDUCE_ALGO", algo},
        {"HORA_JOB_ID",
         std::string(std::getenv("HORA_JOB_ID") ? std::getenv("HORA_JOB_ID") : "") + "-" + algo}};
    // Under mpirun, srun or torchrun each Session's rank 0 serves its own
    // store: one port each (torchrun's first is MASTER_PORT + 1; plain
    // mpirun's Sessions each pick one and send it by MPI).
    std::string addr = std::getenv("HORA_STORE_ADDR") ? std::getenv("HORA_STORE_ADDR") : "";
    if (addr.empty() && std::getenv("MASTER_ADDR") && std::getenv("MASTER_PORT")) {
      addr = std::string(std::getenv("MASTER_ADDR")) + ":" +
             std::to_string(std::atoi(std::getenv("MASTER_PORT")) + 1);
    }
    // srun: the step's first host at the port Hora derives for the step.
    const char* job = std::getenv("SLURM_JOB_ID");
    const char* step = std::getenv("SLURM_STEP_ID");
    const char* nodes = std::getenv("SLURM_STEP_NODELIST");
    if (addr.empty() && job && step && nodes && std::getenv("HORA_RANK") == nullptr) {
      auto host = FirstSlurmHost(nodes);
      auto port = SlurmStorePort(job, step);
      if (host.ok() && port.ok()) addr = *host + ":" + std::to_string(*port);
    }
    if (!addr.empty() && std::getenv("HORA_RANK") == nullptr &&
        std::getenv("HORA_STORE_SERVER") == nullptr) {
      const size_t colon = addr.rfind(':');
      o.settings["HORA_STORE_ADDR"] =
          addr.substr(0, colon + 1) +
          std::to_string(std::atoi(addr.c_str() + colon + 1) + ++extra_port);
    }
    auto per_algo = Session::Create(o);
    if (!per_algo.ok()) {
      std::fprintf(stderr, "FAIL Session::Create(%s): %s\n", algo,
                   per_algo.status().ToString().c_str());
      return 1;
    }
    if (AllreduceChecks(**per_algo, algo) != 0) return 1;
  }
  if (OtherChecks(s) != 0) return 1;
  std::printf("rank %d of %d: %d checks passed\n", s.rank(), s.size(), g_checks);
  return 0;
}
