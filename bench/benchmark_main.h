// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The main of a Google Benchmark program of Hora's: -h and --help print the
// program's `usage` (a line starting "usage:", then what it times) before
// Google Benchmark's own flags.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

namespace hora::bench {

inline int RunBenchmarks(int argc, char** argv, const char* usage) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      // Google Benchmark's own flags follow, printed by Initialize, which exits.
      std::fputs(usage, stdout);
      std::fflush(stdout);
      argv[i] = const_cast<char*>("--help");
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace hora::bench
