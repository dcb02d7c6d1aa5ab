// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// hora._core: the one extension module. One bound function per operation;
// dtypes and devices are dispatched in C++ (tensors arrive as DLPack
// capsules, see dlpack_convert.h). python/hora/ builds the Horovod-style API
// (hora.torch, hora.numpy) on top of it.
//
// Lifetimes: a Handle keeps the tensors it was given (their DLPack owners)
// until the collective is done. A Handle dropped by Python before that hands
// them to its Session, which releases them once done, so Hora never writes
// into freed memory.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "device_buffer.h"
#include "dlpack_convert.h"
#include "errors.h"
#include "hora/build_info.h"
#include "hora/hora.h"
#include "one_call.h"
#include "py_handle.h"
#include "py_session.h"

namespace hora::python {
namespace py = pybind11;
namespace {

using HandlePtr = std::unique_ptr<PyHandle>;

std::string What(const char* op, const std::string& name, const char* which) {
  return std::string(op) + " '" + name + "' " + which;
}

// A tensor of `ps`'s session: a CUDA one is asked for on the session's
// stream, so that its producer's work comes first.
Imported Import(PySession& ps, const py::object& obj, const ArgName& what) {
  return ImportCapsule(obj, what, StreamsOf(ps.Get()));
}

HandlePtr AllreduceAsync(PySession& ps, const std::string& name, const py::object& in,
                         const py::object& out, int op, double pre, double post, int set) {
  Session& s = ps.Get();
  const Reduction red = MakeReduction(op, pre, post);
  Imported i = Import(ps, in, ArgName("allreduce", name, "input"));
  if (out.is_none()) {  // in place
    return ps.Wrap(s.AllreduceAsync(name, i.view, i.view, red, set), name, {i.owner});
  }
  if (py::isinstance<py::bool_>(out)) {
    // True: a new output, from the Session's pool (handle.output()).
    if (!out.cast<bool>() || i.view.device().type != DeviceType::kCPU) {
      ThrowInvalid(What("allreduce", name, "output") +
                   ": give a tensor, None (in place), or True (a new output from Hora's pool, "
                   "for a host tensor; the input is on " +
                   DeviceName(i.view.device()) + ")");
    }
    auto made = std::make_shared<Tensor>(s.NewOutput(i.view.dtype(), i.view.shape()));
    Handle h = s.AllreduceAsync(name, i.view, made->view(), red, set);
    return ps.Wrap(h, name, {i.owner, made}, made);
  }
  Imported o = Import(ps, out, ArgName("allreduce", name, "output"));
  Handle h = s.AllreduceAsync(name, i.view, o.view, red, set);
  return ps.Wrap(h, name, {i.owner, o.owner});
}

// Imports every capsule of `inputs` into `views`, their owners into `keep`.
void ImportAll(PySession& ps, const char* op, const std::string& group, const py::list& inputs,
               std::vector<Keepalive>* keep, std::vector<TensorView>* views) {
  ps.Get();
  for (size_t k = 0; k < inputs.size(); ++k) {
    Imported i = Import(ps, inputs[k], What(op, group, ("input " + std::to_string(k)).c_str()));
    views->push_back(i.view);
    keep->push_back(i.owner);
  }
}

// `made`: each member's output that the binding made, if any.
std::vector<HandlePtr> WrapAll(PySession& ps, const std::vector<Handle>& hs,
                               const std::string& group, const std::vector<Keepalive>& keep,
                               const std::vector<std::shared_ptr<Tensor>>& made = {}) {
  std::vector<HandlePtr> out;
  for (size_t k = 0; k < hs.size(); ++k) {
    // Every member keeps every tensor: a member may finish before the others.
    out.push_back(
        ps.Wrap(hs[k], group + "." + std::to_string(k), keep, k < made.size() ? made[k] : nullptr));
  }
  return out;
}

std::vector<HandlePtr> GroupedAllreduceAsync(PySession& ps, const std::string& group,
                                             const py::list& inputs, const py::object& outputs,
                                             int op, double pre, double post, int set) {
  const Reduction red = MakeReduction(op, pre, post);
  std::vector<Keepalive> keep;
  std::vector<TensorView> in, out;
  ImportAll(ps, "grouped allreduce", group, inputs, &keep, &in);
  std::vector<std::shared_ptr<Tensor>> made;
  if (outputs.is_none()) {  // in place
    out = in;
  } else if (py::isinstance<py::bool_>(outputs)) {
    // True: new outputs, from the Session's pool (each handle's output()).
    for (size_t k = 0; k < in.size(); ++k) {
      if (!outputs.cast<bool>() || in[k].device().type != DeviceType::kCPU) {
        ThrowInvalid(What("grouped allreduce", group, ("output " + std::to_string(k)).c_str()) +
                     ": give a list of tensors, None (in place), or True (new outputs from "
                     "Hora's pool, for host tensors; input " +
                     std::to_string(k) + " is on " + DeviceName(in[k].device()) + ")");
      }
      made.push_back(std::make_shared<Tensor>(ps.Get().NewOutput(in[k].dtype(), in[k].shape())));
      out.push_back(made.back()->view());
      keep.push_back(made.back());
    }
  } else {
    ImportAll(ps, "grouped allreduce", group, outputs.cast<py::list>(), &keep, &out);
  }
  return WrapAll(ps, ps.Get().GroupedAllreduceAsync(group, in, out, red, set), group, keep, made);
}

// A new host tensor of `like`'s dtype and shape from the Session's pool
// (Session::NewOutput): a DLPack capsule, or with `buffer` a writeable
// buffer (for NumPy). For the out-of-place collectives whose output the
// frontend fills first (broadcast).
py::object NewOutputLike(PySession& ps, const py::object& like, bool buffer) {
  Imported i = Import(ps, like, "new output: the tensor to take the dtype and shape of");
  if (i.view.device().type != DeviceType::kCPU) {
    ThrowInvalid("new output: Hora's pool holds host memory; the tensor is on " +
                 DeviceName(i.view.device()));
  }
  auto made = std::make_shared<Tensor>(ps.Get().NewOutput(i.view.dtype(), i.view.shape()));
  if (buffer) return py::cast(OutputBuffer{Handle(), made});
  return ExportView(made->view(), made);
}

HandlePtr AllgatherAsync(PySession& ps, const std::string& name, const py::object& in, int set) {
  Session& s = ps.Get();
  Imported i = Import(ps, in, ArgName("allgather", name, "input"));
  return ps.Wrap(s.AllgatherAsync(name, i.view, set), name, {i.owner});
}

std::vector<HandlePtr> GroupedAllgatherAsync(PySession& ps, const std::string& group,
                                             const py::list& inputs, int set) {
  std::vector<Keepalive> keep;
  std::vector<TensorView> in;
  ImportAll(ps, "grouped allgather", group, inputs, &keep, &in);
  return WrapAll(ps, ps.Get().GroupedAllgatherAsync(group, in, set), group, keep);
}

HandlePtr BroadcastAsync(PySession& ps, const std::string& name, const py::object& t, int root,
                         int set) {
  Session& s = ps.Get();
  Imported i = Import(ps, t, ArgName("broadcast", name, "tensor"));
  return ps.Wrap(s.BroadcastAsync(name, i.view, root, set), name, {i.owner});
}

HandlePtr AlltoallAsync(PySession& ps, const std::string& name, const py::object& in,
                        const std::optional<std::vector<int64_t>>& splits, int set) {
  Session& s = ps.Get();
  Imported i = Import(ps, in, ArgName("alltoall", name, "input"));
  std::vector<int64_t> sp = splits.value_or(std::vector<int64_t>{});
  return ps.Wrap(s.AlltoallAsync(name, i.view, sp, set), name, {i.owner});
}

HandlePtr ReducescatterAsync(PySession& ps, const std::string& name, const py::object& in, int op,
                             double pre, double post, int set) {
  Session& s = ps.Get();
  const Reduction red = MakeReduction(op, pre, post);
  Imported i = Import(ps, in, ArgName("reducescatter", name, "input"));
  return ps.Wrap(s.ReducescatterAsync(name, i.view, red, set), name, {i.owner});
}

std::vector<HandlePtr> GroupedReducescatterAsync(PySession& ps, const std::string& group,
                                                 const py::list& inputs, int op, double pre,
                                                 double post, int set) {
  const Reduction red = MakeReduction(op, pre, post);
  std::vector<Keepalive> keep;
  std::vector<TensorView> in;
  ImportAll(ps, "grouped reducescatter", group, inputs, &keep, &in);
  return WrapAll(ps, ps.Get().GroupedReducescatterAsync(group, in, red, set), group, keep);
}

void Barrier(PySession& ps, int set) {
  PyHandle h(ps.Get().BarrierAsync(set), "barrier", {}, nullptr, ps.owner());
  h.Wait(std::nullopt, std::nullopt);
}

// A call this rank's Python checks refused (Session::RefuseAsync): it
// fails on every rank, the others naming this rank's `message`; this rank
// raises its own error, so its handles are not kept.
void Refuse(PySession& ps, const std::string& collective, const std::string& name,
            const std::string& message, size_t group_size, int set) {
  ps.Get().RefuseAsync(collective, name, InvalidArgument(message), group_size, set);
}

int Join(PySession& ps) {
  PyHandle h(ps.Get().JoinAsync(), "join", {}, nullptr, ps.owner());
  h.Wait(std::nullopt, std::nullopt);
  py::capsule out = h.Output();
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(out.ptr(), "dltensor"));
  return *static_cast<const int32_t*>(m->dl_tensor.data);
}

int AddProcessSet(PySession& ps, const std::vector<int>& ranks) {
  std::shared_ptr<Session> s = ps.Share();
  Result<int> id = [&] {
    py::gil_scoped_release release;
    Result<int> r = s->AddProcessSet(ranks);
    s.reset();  // (without the GIL: it may be the last owner)
    return r;
  }();
  ThrowIfError(id.status());
  return *id;
}

void RemoveProcessSet(PySession& ps, int id) {
  std::shared_ptr<Session> s = ps.Share();
  Status st;
  {
    py::gil_scoped_release release;
    st = s->RemoveProcessSet(id);
    s.reset();  // (without the GIL: it may be the last owner)
  }
  ThrowIfError(st);
}

py::dict Counters(PySession& ps, int set) {
  const Session::EngineCounters c = ps.Get().engine_counters(set);
  py::dict d;
  d["cycles"] = c.cycles;
  d["slow_cycles"] = c.slow_cycles;
  d["coordinator_bytes"] = c.coordinator_bytes;
  d["cache_hits"] = c.cache_hits;
  d["cache_misses"] = c.cache_misses;
  d["cache_evictions"] = c.cache_evictions;
  d["cache_invalidations"] = c.cache_invalidations;
  d["tensors"] = c.tensors;
  d["fused_batches"] = c.fused_batches;
  d["carried_batches"] = c.carried_batches;
  d["window_batches"] = c.window_batches;
  d["nccl_batches"] = c.nccl_batches;
  py::dict routes;
  for (const auto& [name, n] : c.gpu_route_batches) routes[py::str(name)] = n;
  d["gpu_route_batches"] = routes;
  d["outputs_reused"] = c.outputs_reused;
  d["outputs_fresh"] = c.outputs_fresh;
  d["settings_taken"] = c.settings_taken;
  return d;
}

}  // namespace
}  // namespace hora::python

PYBIND11_MODULE(_core, m) {
  namespace py = pybind11;
  using namespace hora;
  using namespace hora::python;
  m.doc() = "Hora's C++ core: Session (one per process) and Handle. See hora.torch.";
  RegisterErrors(m);
  AddDeviceBuffer(m);
  m.def("cuda_built", &hora::CudaBuilt,
        "True when this build of Hora has CUDA (its GPU kernels and device).");
  m.def("nccl_built", &hora::NcclBuiltVersion,
        "NCCL_VERSION_CODE of the nccl.h this build has NCCL's backend from, else 0.");
  m.def("as_bfloat16", &AsBfloat16, py::arg("capsule"),
        "A DLPack capsule of 16-bit integers re-described as bfloat16 (the old one is used up).");
  m.attr("Sum") = HorovodCode(ReduceOp::kSum);
  m.attr("Average") = HorovodCode(ReduceOp::kAverage);
  m.attr("Min") = HorovodCode(ReduceOp::kMin);
  m.attr("Max") = HorovodCode(ReduceOp::kMax);
  m.attr("Product") = HorovodCode(ReduceOp::kProduct);
  m.attr("Adasum") = HorovodCode(ReduceOp::kAdasum);

  py::class_<OutputBuffer>(m, "OutputBuffer", py::buffer_protocol(),
                           "A collective's output as a writeable byte buffer (shares memory).")
      .def_buffer([](const OutputBuffer& b) {
        const Tensor& t = b.tensor();
        return py::buffer_info(t.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(t.num_bytes())}, {1}, false);
      })
      .def_property_readonly("shape", [](const OutputBuffer& b) { return b.tensor().shape(); })
      .def_property_readonly("nbytes",
                             [](const OutputBuffer& b) { return b.tensor().num_bytes(); });
  py::class_<PyHandle>(m, "Handle", "A collective in flight (see Session.*_async).")
      .def_property_readonly("name", &PyHandle::name)
      .def("poll", &PyHandle::Poll, "True once done (never blocks).")
      .def("wait", &PyHandle::Wait, py::arg("timeout_s") = py::none(),
           py::arg("stream") = py::none(),
           "Waits until done; raises the collective's error (a HoraError). With a stream "
           "(a cudaStream_t of the tensors' GPU), that stream waits for the results' last "
           "copies to the GPU instead of the host.")
      .def("output", &PyHandle::Output,
           "The output Hora allocated (allgather, reducescatter, alltoall; an allreduce given "
           "output=True) as a DLPack capsule.")
      .def("output_buffer", &PyHandle::OutputAsBuffer,
           "The same output as a writeable buffer that shares its memory (for NumPy).")
      .def("received_splits", &PyHandle::ReceivedSplits, "Alltoall: rows received from each rank.");

  const auto a = [](const char* n) { return py::arg(n); };
  const auto set = py::arg("process_set") = 0;    // a process set's id; 0: every rank
  const auto buffer = py::arg("buffer") = false;  // a one-call output as a writeable buffer
  py::class_<PySession>(m, "Session",
                        "One rank of a job. Reads the rank layout from the launcher's "
                        "environment (horarun, mpirun, srun, torchrun); alone, a job of one.")
      .def(py::init<const std::optional<std::map<std::string, std::string>>&>(),
           py::arg("settings") = py::none())
      .def_property_readonly("rank", [](PySession& s) { return s.Get().rank(); })
      .def_property_readonly("size", [](PySession& s) { return s.Get().size(); })
      .def_property_readonly("local_rank", [](PySession& s) { return s.Get().local_rank(); })
      .def_property_readonly("local_size", [](PySession& s) { return s.Get().local_size(); })
      .def_property_readonly("cross_rank", [](PySession& s) { return s.Get().cross_rank(); })
      .def_property_readonly("cross_size", [](PySession& s) { return s.Get().cross_size(); })
      .def_property_readonly("is_homogeneous",
                             [](PySession& s) { return s.Get().is_homogeneous(); })
      .def("allreduce_async", &AllreduceAsync, a("name"), a("input"), a("output"),
           py::arg("op") = 0, py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, set)
      .def("allreduce_inplace", &AllreduceInPlace, a("name"), a("tensor"), py::arg("op") = 0,
           py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, set,
           "Allreduce in place of a contiguous host tensor of a dtype but bool, waited for here: "
           "True when done (raises its error); False, the capsule unused, for any other tensor.")
      .def("allreduce_new", &AllreduceNew, a("name"), a("tensor"), py::arg("op") = 0,
           py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, set, buffer,
           "Allreduce of a contiguous host tensor of a dtype but bool into a new one from "
           "Hora's pool: its capsule (buffer=True: a writeable buffer over it) when done (raises "
           "its error); None, the capsule unused, for any other tensor.")
      .def("grouped_allreduce_async", &GroupedAllreduceAsync, a("group"), a("inputs"), a("outputs"),
           py::arg("op") = 0, py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, set)
      .def("allgather_async", &AllgatherAsync, a("name"), a("input"), set)
      .def("allgather_new", &AllgatherNew, a("name"), a("tensor"), set, buffer,
           "Allgather of a contiguous host tensor of a dtype but bool, with a dimension, waited "
           "for here: the output's capsule when done (raises its error); None, the capsule "
           "unused, for any other tensor.")
      .def("broadcast_new", &BroadcastNew, a("name"), a("tensor"), a("root"), set,
           "Broadcast of root's contiguous host tensor of a dtype but bool into a new one from "
           "Hora's pool, waited for here, as allgather_new.")
      .def("alltoall_new", &AlltoallNew, a("name"), a("tensor"), py::arg("splits") = py::none(),
           set, buffer,
           "Alltoall of a contiguous host tensor of a dtype but bool, with a dimension, waited "
           "for here: (output capsule, received splits) when done; None as allgather_new.")
      .def("reducescatter_new", &ReducescatterNew, a("name"), a("tensor"), py::arg("op") = 0,
           py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, set, buffer,
           "Reducescatter of a contiguous host tensor of a dtype but bool, with a dimension, "
           "waited for here, as allgather_new.")
      .def("grouped_allgather_async", &GroupedAllgatherAsync, a("group"), a("inputs"), set)
      .def("broadcast_async", &BroadcastAsync, a("name"), a("tensor"), a("root"), set)
      .def("new_output", &NewOutputLike, a("like"), py::arg("buffer") = false,
           "A new host tensor of like's dtype and shape from Hora's pool of output memory "
           "(HORA_OUTPUT_POOL_BYTES): a DLPack capsule, or with buffer=True a writeable "
           "buffer; its memory goes back to the pool when it is freed.")
      .def("alltoall_async", &AlltoallAsync, a("name"), a("input"), py::arg("splits") = py::none(),
           set)
      .def("reducescatter_async", &ReducescatterAsync, a("name"), a("input"), py::arg("op") = 0,
           py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, set)
      .def("grouped_reducescatter_async", &GroupedReducescatterAsync, a("group"), a("inputs"),
           py::arg("op") = 0, py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, set)
      .def("barrier", &Barrier, set)
      .def("refuse", &Refuse, a("collective"), a("name"), a("message"), py::arg("group_size") = 0,
           set,
           "Submits a collective this rank refused before calling the core (its own checks "
           "failed: `message`), so that it fails on every rank rather than leaving the others "
           "waiting; returns at once.")
      .def("add_process_set", &AddProcessSet, a("ranks"),
           "Collective over every rank: creates a process set of `ranks`; returns its id.")
      .def("remove_process_set", &RemoveProcessSet, a("process_set_id"),
           "Collective over every rank: removes a process set.")
      .def(
          "process_sets", [](PySession& s) { return s.Get().ProcessSets(); },
          "Every process set by id, with its ranks (0: every rank).")
      .def("join", &Join,
           "This rank is out of data: takes part in the others' allreduces with identity "
           "values until every rank has joined; returns the last rank to join.")
      .def("shutdown", &PySession::Shutdown)
      .def(
          "report_failure",
          [](PySession& s, const std::string& what, bool caused_by_peer) {
            std::shared_ptr<Session> session = s.Share();  // (with the GIL)
            py::gil_scoped_release release;
            session->ReportFailure(what, caused_by_peer);
            session.reset();  // (without the GIL: it may be the last owner)
          },
          a("what"), py::arg("caused_by_peer") = false,
          "Tells horarun this rank is failing (an exception's last line) before it tears down; "
          "caused_by_peer: because a peer was lost or ended.")
      .def("start_timeline",
           [](PySession& s, const std::string& path) { ThrowIfError(s.Get().StartTimeline(path)); })
      .def("stop_timeline", [](PySession& s) { ThrowIfError(s.Get().StopTimeline()); })
      .def("engine_counters", &Counters, set)
      .def("describe_config", [](PySession& s) { return s.Get().DescribeConfig(); })
      .def(
          "elastic_host_updates",
          [](PySession& s) {
            hora::Result<hora::Session::HostUpdates> u = s.Get().ElasticHostUpdates();
            ThrowIfError(u.status());
            return py::make_tuple(u->added, u->removed, u->added_known, u->removed_known);
          },
          "(added, removed, added_known, removed_known): how many times horarun's host "
          "discovery reported hosts added, and removed, and how many of each this world "
          "reflects (elastic workers; zeros elsewhere).")
      .def(
          "_device_buffer",
          [](PySession& s, const py::object& host, const py::object& later, double delay_s,
             const py::object& device) {
            return DeviceBuffer::FromHost(s.Get(), host, later, delay_s, device);
          },
          a("host_array"), py::arg("later") = py::none(), py::arg("delay_s") = 0.0,
          py::arg("device") = py::none(),
          "For tests: a CPU tensor on GPU `device` (None: the rank's); `later` rewrites it.")
      .def(
          "_read_device",
          [](PySession& s, const py::object& t, std::optional<uint64_t> after) {
            return DeviceBuffer::ReadBack(s.Get(), t, after);
          },
          a("tensor"), py::arg("after") = py::none(),
          "For tests: a GPU tensor's bytes, after the work queued so far on stream `after`.")
      .def(
          "_hold_copies_to_device",
          [](PySession& s, bool hold) { DeviceBuffer::HoldCopiesToDevice(s.Get(), hold); },
          a("hold"),
          "For tests (HORA_DEVICE=host): copies from host to GPU memory queued while held wait "
          "on their stream until let go.")
      .def(
          "_device_stream",
          [](PySession& s) { return StreamsOf(s.Get())(RankOrdinal(s.Get(), py::none())); },
          "For tests: the stream of the rank's GPU on which Hora works; None without one.")
      .def_property_readonly(
          "mpi_enabled", [](PySession& s) { return s.Get().mpi_enabled(); },
          "True when this job initialised or uses MPI (transport, backend or rendezvous).")
      .def_property_readonly(
          "mpi_threads_supported", [](PySession& s) { return s.Get().mpi_threads_supported(); },
          "True when MPI provided MPI_THREAD_MULTIPLE.");
}
