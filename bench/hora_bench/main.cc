// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// hora-bench: collective sweeps in nccl-tests' vocabulary, one process per
// rank, Hora and its peers measured in the same launch.
//
//   horarun -np 4 build/bin/hora-bench allreduce --sizes 4:64M --check
//       --peers gloo,torch --json out.json     (one command line)
//   horarun --mpi -np 4 build/bin/hora-bench allgather --peers mpi,gloo
//
// Per size and implementation: count, time avg / p50 / p99 in microseconds
// (each iteration's time is the slowest rank's, from a barrier to its end),
// algbw = size / time, busbw = algbw times the collective's factor
// (allreduce 2(n-1)/n; allgather, reducescatter, alltoall (n-1)/n; broadcast
// 1), and with --check the number of wrong elements (any makes the exit code
// 1). Peers: mpi (a Session whose backend is the MPI library's own
// collectives; needs an MPI launcher), gloo (ring and halving-doubling), torch
// (torch.distributed, gloo backend, in a Python process per rank; run after
// the in-process implementations), nccl (NCCL's allreduce and broadcast on
// the GPU, with --device cuda; hora@cuda then runs Hora's own path,
// HORA_GPU_BACKEND=hora, unless the environment says otherwise). Rank 0
// prints and writes --json.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>

#include <unistd.h>

#include "args.h"
#include "common/config.h"
#include "data.h"
#include "impl.h"
#include "limits.h"
#include "mpi/mpi_loader.h"
#include "net/socket.h"
#include "net_util.h"
#include "report.h"
#include "torch_peer.h"
#ifdef HORA_BENCH_GLOO
#include "gloo_impl.h"
#endif

namespace hora::bench {
namespace {

std::vector<uint64_t> Sizes(const Args& a) {
  std::vector<uint64_t> out;
  for (uint64_t b = a.min_bytes; b <= a.max_bytes; b *= static_cast<uint64_t>(a.step_factor)) {
    out.push_back(b);
    if (b == 0) break;  // a sweep of only 0 bytes
  }
  return out;
}

// A second Session whose collectives are the MPI library's own, beside
// Hora's (its own job id keeps their rendezvous keys and segments apart).
Result<std::unique_ptr<Session>> MpiSession() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  if (MpiFlavourFromEnv(env).empty())
    return InvalidArgument(
        "--peers mpi needs an MPI launcher: run under `horarun --mpi` (or mpirun)");
  SessionOptions o;
  o.settings["HORA_BACKEND"] = "mpi";
  o.settings["HORA_JOB_ID"] = Env("HORA_JOB_ID") + "-mpipeer";
  if (Env("HORA_STORE_SERVER") != "horarun" && !Env("HORA_STORE_ADDR").empty()) {
    // Rank 0 serves Hora's store under a plain mpirun: the peer's one port above.
    auto hp = net::ParseHostPort(Env("HORA_STORE_ADDR"));
    if (hp.ok()) o.settings["HORA_STORE_ADDR"] = hp->host + ":" + std::to_string(hp->port + 1);
  }
  return Session::Create(o);
}

// Times one implementation at one size; every rank gets the same record.
Record Measure(Session& s, Impl& impl, const Args& a, const Layout& l,
               const std::vector<uint8_t>& init, Buffers b) {
  Record r;
  r.impl = impl.name();
  r.size_bytes = l.size_bytes;
  r.count = l.in_count;
  Status st = impl.Prepare(a, l, b);
  r.iters = Iterations(a, l.size_bytes);
  std::vector<double> times;
  for (int it = 0; it < a.warmup + r.iters; ++it) {
    std::memcpy(b.in, init.data(), init.size());
    if (st.ok()) impl.BeforeRun();
    Status bar = s.Barrier();
    const auto t0 = std::chrono::steady_clock::now();
    if (st.ok() && bar.ok()) st = impl.Run();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (!bar.ok()) st = bar;
    // The slowest rank's time, and the highest rank that failed (+1; 0: none).
    double mine[2] = {us, st.ok() ? 0.0 : s.rank() + 1.0}, all[2] = {0, 0};
    Status m = s.Allreduce(TensorView::Flat(mine, DataType::kFloat64, 2),
                           TensorView::Flat(all, DataType::kFloat64, 2), {ReduceOp::kMax});
    if (!m.ok()) st = m;
    if (all[1] != 0 || !st.ok()) {
      r.error = st.ok() ? "failed on rank " + std::to_string(static_cast<int>(all[1]) - 1)
                        : "rank " + std::to_string(s.rank()) + ": " + st.ToString();
      return r;
    }
    if (it >= a.warmup) times.push_back(all[0]);
  }
  const Times t = Summarize(times);
  r.avg_us = t.avg;
  r.p50_us = t.p50;
  r.p99_us = t.p99;
  r.algbw_gbps = static_cast<double>(l.size_bytes) / (t.avg * 1e-6) / 1e9;
  r.busbw_gbps = r.algbw_gbps * l.busbw_factor;
  if (a.check) {
    double wrong = static_cast<double>(CountWrong(a, l, s.rank(), s.size(), impl.Output()));
    double total = 0;
    if (s.Allreduce(TensorView::Flat(&wrong, DataType::kFloat64, 1),
                    TensorView::Flat(&total, DataType::kFloat64, 1))
            .ok())
      r.wrong = static_cast<long>(total);
  }
  return r;
}

int Run(const Args& a) {
  SessionOptions options;
  if (!a.algo.empty()) {
    options.settings[a.collective == Collective::kBroadcast ? "HORA_BROADCAST_ALGO"
                                                            : "HORA_ALLREDUCE_ALGO"] = a.algo;
  }
  if (!a.device.empty()) options.settings["HORA_DEVICE"] = a.device;
  const bool nccl_peer = std::find(a.peers.begin(), a.peers.end(), "nccl") != a.peers.end();
  if (nccl_peer && Env("HORA_GPU_BACKEND").empty()) {
    options.settings["HORA_GPU_BACKEND"] = "hora";  // (hora@cuda: Hora's own path, beside NCCL)
  }
  auto created = Session::Create(options);
  if (!created.ok()) {
    std::fprintf(stderr, "hora-bench: %s\n", created.status().ToString().c_str());
    return 1;
  }
  Session& s = **created;
  auto fail = [&](const Status& st) {
    std::fprintf(stderr, "hora-bench: rank %d: %s\n", s.rank(), st.ToString().c_str());
    return 1;
  };
  if (a.root >= s.size())
    return fail(InvalidArgument("--root " + std::to_string(a.root) + " is not a rank of " +
                                std::to_string(s.size())));
  std::vector<std::unique_ptr<Impl>> impls;
  impls.push_back(MakeSessionImpl(s, "hora"));
  if (!a.device.empty()) {  // GPU tensors, beside host ones
    auto d = MakeDeviceImpl(s, a.device);
    if (!d.ok()) return fail(d.status());
    impls.push_back(std::move(*d));
  }
  std::unique_ptr<Session> mpi;
  bool torch = false;
  for (const std::string& p : a.peers) {
    if (p == "mpi") {
      auto m = MpiSession();
      if (!m.ok()) return fail(m.status());
      mpi = std::move(*m);
      impls.push_back(MakeSessionImpl(*mpi, "mpi"));
    } else if (p == "gloo") {
#ifdef HORA_BENCH_GLOO
      auto g = MakeGlooImpls(s, a.collective, TimeoutSeconds());
      if (!g.ok()) return fail(g.status());
      for (auto& impl : *g) impls.push_back(std::move(impl));
#else
      return fail(UnimplementedError("--peers gloo: hora-bench was built without libgloo-dev"));
#endif
    } else if (p == "torch") {
      torch = true;
    } else if (p == "nccl") {
      auto n = MakeNcclImpl(s, a.device);
      if (!n.ok()) return fail(n.status());
      impls.push_back(std::move(*n));
    }
  }
  const std::string transport = Env("HORA_TRANSPORT");
  auto limit = MeasureLimit(s, transport == "tcp" || s.local_size() != s.size(),
                            static_cast<size_t>(a.max_bytes), TimeoutSeconds());
  if (!limit.ok()) return fail(limit.status());
  if (s.rank() == 0) PrintHeader(a, s.size(), limit->line);

  std::vector<Record> records;
  std::map<std::string, bool> dead;  // implementations that failed once
  long wrong = 0;
  bool hora_failed = false;
  auto keep = [&](Record r, const Layout& l) {
    r.collective = CollectiveName(a.collective);
    r.dtype = DataTypeName(a.dtype);
    r.op = ReduceOpName(a.op);
    r.algo = r.impl == "hora" ? (a.algo.empty() ? "auto" : a.algo) : r.algo;
    r.ranks = s.size();
    r.inplace = a.inplace;
    if (r.count == 0) r.count = l.in_count;
    r.limit_kind = limit->kind;
    r.limit_gbps = limit->gbps;
    wrong += std::max(0L, r.wrong);
    hora_failed |= r.impl == "hora" && !r.error.empty();
    if (s.rank() == 0) PrintRow(r);
    records.push_back(std::move(r));
  };
  const std::vector<uint64_t> sizes = Sizes(a);
  for (uint64_t bytes : sizes) {
    const Layout l = MakeLayout(a.collective, a.dtype, bytes, s.size());
    const std::vector<uint8_t> init = MakeInput(a, l, s.rank());
    std::vector<uint8_t> in(init.size()), out(l.out_count * DataTypeSize(a.dtype));
    Buffers b{in.data(), out.data()};
    if (a.inplace || a.collective == Collective::kBroadcast) b.out = b.in;
    for (auto& impl : impls) {
      if (dead[impl->name()]) continue;
      const std::string why = impl->Unsupported(a);
      Record r = why.empty() ? Measure(s, *impl, a, l, init, b) : Record{};
      if (!why.empty()) r.impl = impl->name(), r.error = why, r.size_bytes = l.size_bytes;
      dead[impl->name()] = !r.error.empty();
      keep(std::move(r), l);
    }
  }
  if (torch) {
    auto t = RunTorchPeer(s, a, sizes, TimeoutSeconds());
    if (!t.ok()) return fail(t.status());
    for (Record& r : *t) keep(std::move(r), Layout{});  // the peer gives its own counts
  }
  if (s.rank() == 0) {
    PrintComparison(records);
    if (!a.json_path.empty()) {
      Status st = WriteJson(a.json_path, records);
      if (!st.ok()) return fail(st);
    }
  }
  if (wrong > 0 && s.rank() == 0) std::fprintf(stderr, "hora-bench: %ld wrong elements\n", wrong);
  return wrong > 0 || hora_failed ? 1 : 0;
}

}  // namespace
}  // namespace hora::bench

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::fputs(hora::bench::kUsage, stdout);
      return 0;
    }
  }
  auto args = hora::bench::ParseArgs(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "hora-bench: %s\n%s", args.status().message().c_str(),
                 hora::bench::kUsage);
    return 2;
  }
  return hora::bench::Run(*args);
}
