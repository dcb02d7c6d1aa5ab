// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "kernels/isa.h"

namespace hora::kernels::internal {

namespace {

Isa DetectIsa() {
#if defined(__x86_64__)
  // Reads the feature bits libgcc gathered (incl. the OS's xgetbv state);
  // the init call makes that safe even before static constructors ran.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return Isa::kX86V4;
  if (__builtin_cpu_supports("x86-64-v3")) return Isa::kX86V3;
#endif
  return Isa::kBaseline;
}

}  // namespace

Isa BestIsa() {
  // A fact of the machine, looked up once: every kernel call asks.
  static const Isa best = DetectIsa();
  return best;
}

bool IsaSupported(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(BestIsa()); }

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kBaseline:
      return "baseline";
    case Isa::kX86V3:
      return "x86-64-v3";
    case Isa::kX86V4:
      return "x86-64-v4";
  }
  return "unknown";
}

}  // namespace hora::kernels::internal
