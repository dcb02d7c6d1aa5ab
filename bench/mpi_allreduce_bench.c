/* Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
 *
 * The peer that hora-bench is compared with: MPI_Allreduce (float32 sum,
 * in place) over the same sizes, iteration counts and timing rule (each
 * iteration's time is the slowest rank's, after a barrier), printing the same
 * columns. Built against each MPI found (mpicc.openmpi / mpicc.mpich):
 *
 *   mpirun.openmpi --allow-run-as-root -np 2 build/bin/mpi-allreduce-bench-openmpi 8:64M 20
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_bytes(const char* s) {
  char* end = NULL;
  size_t v = strtoull(s, &end, 10);
  if (*end == 'K' || *end == 'k') v <<= 10;
  if (*end == 'M' || *end == 'm') v <<= 20;
  if (*end == 'G' || *end == 'g') v <<= 30;
  return v;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static const char kUsage[] =
    "usage: mpi-allreduce-bench [LOW[:HIGH]] [ITERATIONS]\n"
    "MPI_Allreduce (float32 sum, in place) from LOW to HIGH bytes, doubling (default\n"
    "8:64M, 20 iterations after 5 warm-up); sizes take K, M and G. Run under mpirun.\n";

int main(int argc, char** argv) {
  /* Before MPI_Init: help needs no MPI job. */
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(kUsage, stdout);
      return 0;
    }
  }
  if ((argc > 1 && parse_bytes(argv[1]) == 0) || (argc > 2 && atoi(argv[2]) < 1) || argc > 3) {
    fprintf(stderr, "mpi-allreduce-bench: bad arguments\n%s", kUsage);
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  size_t lo = 8, hi = 64u << 20;
  int iters = 20, warmup = 5;
  if (argc > 1) {
    char* colon = strchr(argv[1], ':');
    lo = parse_bytes(argv[1]);
    hi = colon ? parse_bytes(colon + 1) : lo;
  }
  if (argc > 2) iters = atoi(argv[2]);
  double* times = malloc(sizeof(double) * (size_t)iters);
  if (rank == 0) {
    printf("# MPI_Allreduce: %d ranks, float32 sum, in place, %d iterations after %d warm-up\n", n,
           iters, warmup);
    printf("# %12s %12s %10s %10s %10s %10s %10s %8s\n", "size(B)", "count", "avg(us)", "p50(us)",
           "p99(us)", "algbw", "busbw", "#wrong");
  }
  for (size_t bytes = lo; bytes <= hi; bytes *= 2) {
    size_t count = bytes / 4 ? bytes / 4 : 1;
    float* buf = malloc(count * 4);
    long wrong = 0;
    for (int it = 0; it < warmup + iters; ++it) {
      for (size_t i = 0; i < count; ++i) buf[i] = (float)((rank + 1) * ((i % 7) + 1) % 16);
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double us = (MPI_Wtime() - t0) * 1e6, slowest;
      MPI_Allreduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (it >= warmup) times[it - warmup] = slowest;
    }
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r) want += (float)((r + 1) * ((i % 7) + 1) % 16);
      wrong += buf[i] != want;
    }
    qsort(times, (size_t)iters, sizeof(double), cmp);
    double avg = 0;
    for (int i = 0; i < iters; ++i) avg += times[i];
    avg /= iters;
    int p99 = (int)((iters * 99 + 99) / 100) - 1;
    double algbw = (double)(count * 4) / (avg * 1e-6) / 1e9;
    if (rank == 0) {
      printf("  %12zu %12zu %10.1f %10.1f %10.1f %10.3f %10.3f %8ld\n", count * 4, count, avg,
             times[iters / 2], times[p99], algbw, algbw * 2.0 * (n - 1) / n, wrong);
    }
    free(buf);
  }
  free(times);
  MPI_Finalize();
  return 0;
}
