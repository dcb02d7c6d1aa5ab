// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "support/device_settings.h"

#include <cstdlib>
#include <cstring>

#include "support/device_io.h"

namespace hora::testing {

Settings DeviceSettings(std::string_view path) {
  const char* device = std::getenv("HORATEST_DEVICE");
  const bool host = device == nullptr || std::string_view(device) == "host";
  return TestSettings({{"HORA_DEVICE", device != nullptr ? device : "host"},
                       {"HORA_STAGING_CHUNK_BYTES", path == "whole" ? "0" : "3000"},
                       {"HORA_GPU_IPC", path == "window" || path == "nccl" ? "1" : "0"},
                       {"HORA_GPU_WINDOW_BYTES", "40000"},
                       // (At these sizes the cost would send them to staging.)
                       {"HORA_GPU_ROUTE", path == "window" ? "window" : ""},
                       {"HORA_GPU_BACKEND", path == "nccl" ? "nccl" : "hora"},
                       {"HORA_NCCL_LIBRARY", host ? "host:queued" : ""}});
}

Status ExpectFloats(const std::vector<uint8_t>& got, float want, const std::string& what) {
  for (size_t i = 0; i < got.size() / 4; ++i) {
    float v;
    std::memcpy(&v, got.data() + i * 4, 4);
    if (v != want) {
      return InternalError(what + ": element " + std::to_string(i) + " is " + std::to_string(v) +
                           ", not " + std::to_string(want));
    }
  }
  return Status::Ok();
}

Status AllreduceRankValues(Session& s, int r, size_t count, const std::string& what) {
  DeviceIo io(s);
  if (!io.ok()) return io.error();
  std::vector<float> host(count, static_cast<float>(r + 1));
  void* d = io.Upload(host.data(), count * 4);
  const TensorView v = OnGpu(d, DataType::kFloat32, {static_cast<int64_t>(count)});
  HORA_RETURN_IF_ERROR(s.Allreduce(v, v));
  const int n = s.size();
  return ExpectFloats(io.Download(d, count * 4), static_cast<float>(n * (n + 1) / 2), what);
}

}  // namespace hora::testing
