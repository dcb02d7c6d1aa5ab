// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The blocking collectives that write into a caller's output (allgather,
// reducescatter, alltoall), for GPU tensors: the collective runs through the
// engine as the form that returns its result does, on the GPU, and the
// result is then copied into the output there.
#include "api/session_impl.h"
#include "gpu/blocking_copy.h"

namespace hora {

Status IntoGpuOutput(Session::Impl& impl, const char* op, const TensorView& input,
                     const TensorView& output, Result<Tensor> result) {
  HORA_RETURN_IF_ERROR(result.status());
  const Tensor& got = *result;
  const std::string where = impl.Where(op);
  if (output.device() != got.device()) {
    return InvalidArgument(where + ": output " + output.Describe() +
                           " is not on the GPU of input " + input.Describe() +
                           ": a GPU tensor's result goes on its GPU");
  }
  HORA_RETURN_IF_ERROR(CheckDeviceMemory(
      impl, [&] { return where + ": output"; }, output));
  if (output.dtype() != got.dtype() || output.num_elements() != got.num_elements()) {
    return InvalidArgument(where + ": output " + output.Describe() + " does not fit the result " +
                           got.view().Describe() + " (dtype and element count must match)");
  }
  const auto* in = static_cast<const std::byte*>(input.data());
  const auto* out = static_cast<const std::byte*>(output.data());
  if (input.num_bytes() > 0 && output.num_bytes() > 0 && in < out + output.num_bytes() &&
      out < in + input.num_bytes()) {
    return InvalidArgument(where + ": output " + output.Describe() + " overlaps input " +
                           input.Describe() + "; " + op + " does not run in place");
  }
  std::shared_ptr<gpu::Device> device = impl.devices.opened();
  if (!device) return InternalError(where + ": a GPU result without an open device");
  // On Hora's stream, after the engine's copies; bounded as the engine's.
  const double bound = impl.config.timeout_s > 0 ? impl.config.timeout_s : 600.0;
  const Status st = gpu::CopyWithinDevice(*device, impl.devices.stream(), output.data(), got.data(),
                                          got.num_bytes(), SecondsToDuration(bound));
  if (st.ok()) return st;
  return st.WithContext(where + ": copying the result into output " + output.Describe());
}

}  // namespace hora
