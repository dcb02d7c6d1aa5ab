// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A program of a C++ user, linked with libhora.so alone and its public
// headers: the test doubles are not in it. HORA_DEVICE=host makes a GPU
// tensor's collective fail, saying why; host tensors work as ever.
// (ctest libhora_has_no_doubles: prints "ok" and exits 0, else 1.)
#include <cstdio>
#include <cstring>
#include <string>

#include "hora/hora.h"

int main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf(
        "usage: hora-libhora-check\n"
        "A C++ user's program linked with libhora.so alone: checks that the test doubles are\n"
        "not in it (HORA_DEVICE=host fails, saying why) and that host tensors work.\n");
    return 0;
  }
  hora::SessionOptions options;
  options.rank = 0;
  options.world = hora::ThreadWorld::Create(1);
  options.read_environment = false;
  options.settings = {{"HORA_DEVICE", "host"}};
  auto session = hora::Session::Create(options);
  if (!session.ok()) {
    std::printf("Session::Create failed: %s\n", session.status().ToString().c_str());
    return 1;
  }
  float x[4] = {1, 2, 3, 4};
  const hora::TensorView gpu(x, hora::DataType::kFloat32, {4},
                             hora::Device{hora::DeviceType::kCUDA, 0});
  hora::Status st = (*session)->Allreduce(gpu, gpu);
  if (st.ok() ||
      st.message().find("the host device is a test double, which this build (libhora.so) leaves "
                        "out") == std::string::npos) {
    std::printf("a GPU tensor on HORA_DEVICE=host gave: %s\n", st.ToString().c_str());
    return 1;
  }
  const hora::TensorView host(x, hora::DataType::kFloat32, {4});
  st = (*session)->Allreduce(host, host);
  if (!st.ok() || x[0] != 1 || x[3] != 4) {
    std::printf("a host allreduce gave: %s, x = %g %g\n", st.ToString().c_str(), x[0], x[3]);
    return 1;
  }
  std::printf("ok\n");
  return 0;
}
