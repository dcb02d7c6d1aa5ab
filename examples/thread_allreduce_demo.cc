// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// `make demo`: four ranks, run as threads of this process, average a gradient
// -like tensor with each of Hora's allreduce algorithms, check the result
// against the value computed here, and print what happened.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "hora/hora.h"

namespace {

constexpr int kRanks = 4;
constexpr size_t kCount = 1 << 20;  // 4 MiB of float32 per rank

struct Outcome {
  hora::Status status;
  double seconds = 0;
  double max_error = 0;
};

Outcome RunAlgorithm(const char* algo) {
  auto world = hora::ThreadWorld::Create(kRanks);
  std::vector<Outcome> outcomes(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      Outcome& out = outcomes[static_cast<size_t>(rank)];
      hora::SessionOptions opts;
      opts.rank = rank;
      opts.world = world;
      opts.settings = {{"HORA_ALLREDUCE_ALGO", algo}};
      auto session = hora::Session::Create(opts);
      if (!session.ok()) {
        out.status = session.status();
        return;
      }
      // Rank r's "gradient": element i is (r + 1) * sin(i).
      std::vector<float> grad(kCount);
      for (size_t i = 0; i < kCount; ++i)
        grad[i] = static_cast<float>((rank + 1) * std::sin(i * 1e-3));
      auto view = hora::TensorView::Flat(grad.data(), hora::DataType::kFloat32, kCount);
      const auto start = std::chrono::steady_clock::now();
      out.status = (*session)->Allreduce(view, view, {hora::ReduceOp::kAverage});
      out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      // The average of (r + 1) over 4 ranks is 2.5.
      for (size_t i = 0; i < kCount && out.status.ok(); ++i) {
        out.max_error = std::max(out.max_error, std::fabs(grad[i] - 2.5 * std::sin(i * 1e-3)));
      }
    });
  }
  for (auto& t : threads) t.join();
  Outcome worst = outcomes[0];
  for (const Outcome& o : outcomes) {
    if (!o.status.ok()) return o;
    worst.seconds = std::max(worst.seconds, o.seconds);
    worst.max_error = std::max(worst.max_error, o.max_error);
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    const bool help = std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0;
    std::fprintf(help ? stdout : stderr,
                 "usage: hora-demo\n"
                 "Runs %d ranks as threads of this process and checks each allreduce algorithm\n"
                 "(ring, recursive_doubling, halving_doubling) against the expected average.\n",
                 kRanks);
    return help ? 0 : 2;
  }
  std::printf(
      "Hora demo: %d ranks as threads, allreduce(average) of %zu float32 (%.0f MiB) per rank\n",
      kRanks, kCount, kCount * 4.0 / (1 << 20));
  std::printf("rank r contributes (r+1)*sin(i*1e-3); every rank must end with 2.5*sin(i*1e-3)\n\n");
  std::printf("%-20s %10s %14s  %s\n", "algorithm", "time (ms)", "max |error|", "result");
  int failures = 0;
  for (const char* algo : {"ring", "recursive_doubling", "halving_doubling"}) {
    Outcome o = RunAlgorithm(algo);
    const bool ok = o.status.ok() && o.max_error < 1e-5;
    failures += ok ? 0 : 1;
    std::printf("%-20s %10.2f %14.3g  %s\n", algo, o.seconds * 1e3, o.max_error,
                ok              ? "OK"
                : o.status.ok() ? "WRONG"
                                : o.status.ToString().c_str());
  }
  std::printf("\n%s\n",
              failures == 0 ? "all algorithms agree with the reference" : "FAILED: see above");
  return failures == 0 ? 0 : 1;
}
