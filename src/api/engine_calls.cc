// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// How a Session hands a collective to the engine of its process set: the
// checks every asynchronous call begins with (BeginEngineCall), and an
// engine's start over the set's control plane (StartEngine).
#include <string_view>

#include "api/autotune_start.h"
#include "api/session_impl.h"
#include "backends/comm_control_plane.h"
#include "device/device_backend.h"

namespace hora {

EngineCall BeginEngineCall(Session::Impl& impl, int set_id, const std::string& name, OpType op) {
  EngineCall call;
  call.op = op;
  call.cacheable = !name.empty();
  if (!name.empty()) call.given = &name;
  // (Before the lock: a forked child may hold a copy of it held.)
  if (Status st = ForkedChildError(impl, OpTypeName(op)); !st.ok()) {
    if (name.empty()) call.made = OpTypeName(op);
    call.status = std::move(st);
    return call;
  }
  if (set_id == 0 && !name.empty()) {
    call.set = impl.global;
    call.impl = &impl;
    call.engine = impl.global->engine.get();
    return call;
  }
  MutexLock lock(impl.engine_mu);
  auto it = impl.sets.find(set_id);
  if (it == impl.sets.end()) {
    if (name.empty()) call.made = OpTypeName(op);
    call.status = InvalidArgument(Where(impl, op, call.name()) + ": there is no process set " +
                                  std::to_string(set_id) + " (never added, or removed)");
    return call;
  }
  ProcessSetState& set = *it->second;
  if (name.empty()) {
    call.made = std::string(OpTypeName(op)) + ".noname." +
                std::to_string(set.unnamed[static_cast<int>(op)]++);
  }
  if (!set.member()) {
    call.status = InvalidArgument(Where(impl, op, call.name()) + ": rank " +
                                  std::to_string(impl.comm.rank()) + " is not in " + set.Label());
    return call;
  }
  call.set = &set;
  call.holds = it->second;
  call.impl = &impl;
  call.engine = set.engine.get();  // (it lives as long as the set: call.holds holds that)
  return call;
}

void StartEngine(Session::Impl& impl, ProcessSetState& set) {
  if (set.engine) return;
  set.control = CreateCommControlPlane(*set.control_comm, *set.backend);
  // The engine's two backends: the host's (the set's), and the GPU's.
  const ControlPlane* control = set.control.get();
  auto device = std::make_unique<DeviceBackend>(
      impl.config, impl.logger,
      DeviceBackend::Place{
          &impl.devices, &impl.nccl_order, set.id, set.backend.get(), control->rank(),
          control->size(), set.Label(), [control] { return control->LostPeer(); },
          ChooseNccl(impl.config.nccl_library), impl.gpu_routing,
          // (Device windows where Hora's own backend runs the set.)
          std::string_view(set.backend->name()) == "hora" ? set.data_comm.get() : nullptr,
          &impl.selector});
  // Autotuning tunes the global set's engine; other sets keep the settings.
  std::unique_ptr<Autotuner> tuner =
      set.id == 0 ? StartAutotuner(impl.config, *set.data_comm,
                                   std::string_view(set.backend->name()) == "hora", impl.logger)
                  : nullptr;
  set.engine = std::make_unique<Engine>(impl.config, *set.control, *set.backend, impl.logger,
                                        set.Label(), set.id == 0 ? std::vector<int>{} : set.ranks,
                                        std::move(device), impl.output_pool, std::move(tuner));
  set.engine->SetTimeline(impl.timeline);
}

Status DeviceMemoryStatus(const Session::Impl& impl, const TensorView& tensor) {
  if (tensor.device().type != DeviceType::kCUDA) return Status::Ok();
  return impl.devices.CheckTensorMemory(tensor.device().index, tensor.data(), tensor.num_bytes());
}

Result<Tensor> WaitForOutput(Handle h) {
  HORA_RETURN_IF_ERROR(h.Wait(kWaitAsLongAsItTakes));
  std::optional<Tensor> out = h.TakeOutput();
  if (!out) return InternalError("a finished collective left no output");
  return std::move(*out);
}

}  // namespace hora
