// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "build_info.h"

#include "hora/build_info.h"

#ifndef HORA_VERSION
#error "the build defines HORA_VERSION (CMakeLists.txt)"
#endif

namespace hora::horarun {
namespace {

// HORA_BUILT_MPI: the MPI plugins built, "openmpi,mpich" or "".
constexpr const char kMpiPlugins[] = HORA_BUILT_MPI;
constexpr bool kPython = HORA_BUILT_PYTHON != 0;

std::string Line(bool built, const std::string& name) {
  return std::string("    [") + (built ? "X" : " ") + "] " + name + "\n";
}

// "NCCL 2.28.9 (libnccl.so.2, loaded when a job uses it)", or "NCCL".
std::string NcclText() {
  const int v = NcclBuiltVersion();
  if (v == 0) return "NCCL";
  // (NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch since 2.9,
  // major * 1000 + minor * 100 + patch before.)
  const int major = v >= 10000 ? v / 10000 : v / 1000;
  const int minor = v >= 10000 ? v / 100 % 100 : v / 100 % 10;
  return "NCCL " + std::to_string(major) + "." + std::to_string(minor) + "." +
         std::to_string(v % 100) + " (libnccl.so.2, loaded when a job uses it)";
}

}  // namespace

std::string BuildComment() {
  return "# Hora " + std::string(HORA_VERSION) + "; CUDA: " + CudaBuildText() + "\n";
}

std::string VersionText() { return std::string("horarun (Hora) ") + HORA_VERSION + "\n"; }

std::string CheckBuildText() {
  const std::string mpi = kMpiPlugins;
  const bool has_mpi = !mpi.empty();
  const std::string mpi_name = has_mpi ? "MPI (" + mpi + ")" : "MPI";
  return std::string("Hora ") + HORA_VERSION + ":\n\nAvailable Frameworks:\n" +
         Line(kPython, "PyTorch (hora.torch)") +
         Line(kPython, "TensorFlow and Keras (hora.tensorflow, hora.keras)") +
         Line(kPython, "JAX (hora.jax)") + Line(kPython, "NumPy (hora.numpy)") +
         Line(false, "MXNet") + "\nAvailable Controllers:\n" +
         Line(true, "horarun (Hora's own start, --gloo)") + Line(has_mpi, mpi_name) +
         Line(kPython, "Ray (hora.ray)") + "\nAvailable Tensor Operations:\n" +
         Line(true, "Hora (shared memory, TCP)") + Line(has_mpi, mpi_name) +
         Line(NcclBuiltVersion() != 0, NcclText()) + Line(false, "Gloo") + Line(false, "DDL") +
         Line(false, "CCL") + "\nAvailable Devices:\n" + Line(true, "CPU") +
         Line(CudaBuilt(), "CUDA: " + CudaBuildText());
}

}  // namespace hora::horarun
