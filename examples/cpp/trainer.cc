// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Data-parallel linear regression in C++: each rank fits y = w.x on its own
// shard of a synthetic data set, and the gradients are averaged across
// ranks with Hora's allreduce. Prints rank 0's weights and exits non-zero
// unless they are close to the true ones and identical on every rank.
//
//   horarun -np 2 ./trainer
#include <hora/hora.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  auto created = hora::Session::Create({});  // the layout comes from the launcher
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
    return 1;
  }
  hora::Session& session = **created;
  const int rank = session.rank(), size = session.size();
  const std::vector<float> truth = {2.0f, -1.0f, 0.5f};
  std::vector<float> w(3, 0.0f), grad(3);
  for (int step = 0; step < 200; ++step) {
    // This rank's shard: rows rank, rank + size, ... of a fixed data set.
    grad.assign(3, 0.0f);
    for (int row = rank; row < 64; row += size) {
      float x[3] = {std::sin(row * 1.0f), std::cos(row * 0.7f), 1.0f};
      float err = -(truth[0] * x[0] + truth[1] * x[1] + truth[2] * x[2]);
      for (int i = 0; i < 3; ++i) err += w[i] * x[i];
      for (int i = 0; i < 3; ++i) grad[i] += 2.0f * err * x[i] / 64.0f * size;
    }
    auto view = hora::TensorView::Flat(grad.data(), hora::DataType::kFloat32, grad.size());
    hora::Status st = session.Allreduce(view, view, {hora::ReduceOp::kAverage});
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      return 1;
    }
    for (int i = 0; i < 3; ++i) w[i] -= 0.1f * grad[i];
  }
  // Every rank must hold the same weights: gather them all.
  std::vector<float> all(3 * static_cast<size_t>(size));
  hora::Status st =
      session.Allgather(hora::TensorView::Flat(w.data(), hora::DataType::kFloat32, 3),
                        hora::TensorView::Flat(all.data(), hora::DataType::kFloat32, all.size()));
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  bool ok = true;
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < 3; ++i) ok = ok && all[3 * r + i] == w[i];
  for (int i = 0; i < 3; ++i) ok = ok && std::fabs(w[i] - truth[i]) < 1e-2f;
  if (rank == 0) std::printf("w = %.4f %.4f %.4f (%s)\n", w[0], w[1], w[2], ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
