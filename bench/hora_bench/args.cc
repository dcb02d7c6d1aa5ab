// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "args.h"

#include <cstdlib>
#include <sstream>

#include "common/units.h"

namespace hora::bench {

const char kUsage[] =
    "usage: hora-bench allreduce|allgather|broadcast|alltoall|reducescatter\n"
    "         [--sizes LOW:HIGH] [--step-factor F] [--iters N] [--iters-small N] [--warmup N]\n"
    "         [--dtype f32|f16|bf16|f64|i8|u8|i16|i32|i64] [--op sum|average|min|max|product]\n"
    "         [--algo NAME] [--inplace] [--root R] [--check] [--peers mpi,gloo,torch,nccl]\n"
    "         [--json FILE] [--python PATH] [--device host|cuda]\n"
    "Run one process per rank under horarun (or horarun --mpi / mpirun for the mpi peer).\n"
    "--device: also Hora on GPU tensors (\"hora@host\": the host device; \"hora@cuda\").\n"
    "--iters-small: iterations at sizes of at most 64 KiB (default: --iters).\n";

const char* CollectiveName(Collective c) {
  switch (c) {
    case Collective::kAllreduce:
      return "allreduce";
    case Collective::kAllgather:
      return "allgather";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kAlltoall:
      return "alltoall";
    case Collective::kReducescatter:
      return "reducescatter";
  }
  return "?";
}

namespace {

Status Bad(const std::string& flag, const std::string& value, const std::string& why) {
  return InvalidArgument(flag + " '" + value + "': " + why);
}

Result<int> PositiveInt(const std::string& flag, const std::string& v, int min) {
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < min || x > (1 << 30))
    return Bad(flag, v, "needs an integer >= " + std::to_string(min));
  return static_cast<int>(x);
}

}  // namespace

Result<Args> ParseArgs(int argc, char** argv) {
  Args a;
  if (argc < 2) return InvalidArgument("no collective given");
  const std::string name = argv[1];
  bool known = false;
  for (Collective c : {Collective::kAllreduce, Collective::kAllgather, Collective::kBroadcast,
                       Collective::kAlltoall, Collective::kReducescatter}) {
    if (name == CollectiveName(c)) a.collective = c, known = true;
  }
  if (!known) return InvalidArgument("unknown collective '" + name + "'");
  for (int i = 2; i < argc; ++i) {
    const std::string f = argv[i];
    const bool has_value = i + 1 < argc;
    auto next = [&]() -> std::string { return has_value ? argv[++i] : ""; };
    if (f == "--inplace") {
      a.inplace = true;
      continue;
    }
    if (f == "--check") {
      a.check = true;
      continue;
    }
    if (f.rfind("--", 0) != 0) return InvalidArgument("unexpected argument '" + f + "'");
    if (!has_value) return InvalidArgument(f + " needs a value");
    const std::string v = next();
    if (f == "--sizes") {
      const auto colon = v.find(':');
      const auto lo = ParseBytes(v.substr(0, colon));
      const auto hi = colon == std::string::npos ? lo : ParseBytes(v.substr(colon + 1));
      if (!lo || !hi || *hi < *lo) return Bad(f, v, "is not LOW:HIGH (bytes, e.g. 4:64M)");
      a.min_bytes = *lo;
      a.max_bytes = *hi;
    } else if (f == "--step-factor") {
      HORA_ASSIGN_OR_RETURN(a.step_factor, PositiveInt(f, v, 2));
    } else if (f == "--iters") {
      HORA_ASSIGN_OR_RETURN(a.iters, PositiveInt(f, v, 1));
    } else if (f == "--iters-small") {
      HORA_ASSIGN_OR_RETURN(a.iters_small, PositiveInt(f, v, 1));
    } else if (f == "--warmup") {
      HORA_ASSIGN_OR_RETURN(a.warmup, PositiveInt(f, v, 0));
    } else if (f == "--root") {
      HORA_ASSIGN_OR_RETURN(a.root, PositiveInt(f, v, 0));
    } else if (f == "--dtype") {
      const auto t = ParseDataType(v);
      if (!t || *t == DataType::kBool) return Bad(f, v, "is not a numeric dtype");
      a.dtype = *t;
    } else if (f == "--op") {
      const auto o = ParseReduceOp(v);
      if (!o) return Bad(f, v, "is not one of sum, average, min, max, product");
      a.op = *o;
    } else if (f == "--algo") {
      a.algo = v;
    } else if (f == "--json") {
      a.json_path = v;
    } else if (f == "--python") {
      a.python = v;
    } else if (f == "--device") {
      if (v != "host" && v != "cuda") return Bad(f, v, "is not one of host, cuda");
      a.device = v;
    } else if (f == "--peers") {
      std::stringstream ss(v);
      std::string p;
      while (std::getline(ss, p, ',')) {
        if (p != "mpi" && p != "gloo" && p != "torch" && p != "nccl")
          return Bad(f, v, "'" + p + "' is not one of mpi, gloo, torch, nccl");
        a.peers.push_back(p);
      }
    } else {
      return InvalidArgument("unknown flag '" + f + "'");
    }
  }
  if (!a.algo.empty() && a.collective != Collective::kAllreduce &&
      a.collective != Collective::kBroadcast)
    return InvalidArgument("--algo '" + a.algo + "': " + CollectiveName(a.collective) +
                           " has one algorithm (--algo applies to allreduce and broadcast)");
  if (a.inplace && a.collective != Collective::kAllreduce && a.collective != Collective::kBroadcast)
    return InvalidArgument(std::string("--inplace: ") + CollectiveName(a.collective) +
                           " allocates its output (only allreduce and broadcast run in place)");
  return a;
}

}  // namespace hora::bench
