// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "mpi/plugin/mpi_library.h"

#include <cstdlib>
#include <mutex>

#include "kernels/reduce.h"
#include "transport/mpi/mpi_transport.h"

namespace hora::mpi {
namespace {

constexpr ReduceOp kOps[4] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct};

template <DataType D, ReduceOp O>
void UserReduce(void* in, void* inout, int* len, MPI_Datatype*) {
  kernels::Reduce(D, O, inout, in, static_cast<size_t>(*len));
}

template <DataType D>
void CreateOps(MPI_Op (&ops)[4]) {
  MPI_Op_create(&UserReduce<D, ReduceOp::kSum>, 1, &ops[0]);
  MPI_Op_create(&UserReduce<D, ReduceOp::kMin>, 1, &ops[1]);
  MPI_Op_create(&UserReduce<D, ReduceOp::kMax>, 1, &ops[2]);
  MPI_Op_create(&UserReduce<D, ReduceOp::kProduct>, 1, &ops[3]);
}

int OpIndex(ReduceOp op) {
  for (int i = 0; i < 4; ++i)
    if (kOps[i] == op) return i;
  return 0;
}

// The library, once Open has succeeded (for FinalizeAtExit).
std::atomic<Library*> opened_library{nullptr};

void FinalizeAtExit() {
  const Library* lib = opened_library.load();
  if (lib != nullptr && lib->abandoned_requests()) return;  // see AbandonRequests
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

const char* ThreadLevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    default:
      return "MPI_THREAD_MULTIPLE";
  }
}

}  // namespace

Library* Library::Open(std::string* error) {
  // MPI is initialised once per process, so its library object is too.
  static std::mutex open_mu;
  static Library* instance = nullptr;
  std::lock_guard<std::mutex> lock(open_mu);
  if (instance != nullptr) return instance;
  auto* lib = new Library();
  Status st = lib->Init();
  if (!st.ok()) {
    *error = st.message();
    delete lib;
    return nullptr;
  }
  instance = lib;
  opened_library.store(lib);
  return instance;
}

Status Library::Init() {
  int initialized = 0, finalized = 0, provided = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) return UnavailableError("MPI was already finalised in this process");
  if (!initialized) {
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) return UnavailableError("MPI_Init_thread failed: " + MpiErrorString(rc));
    std::atexit(&FinalizeAtExit);  // only when Hora initialised MPI
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    return UnavailableError(std::string("MPI runs at thread level ") + ThreadLevelName(provided) +
                            "; Hora needs at least MPI_THREAD_SERIALIZED (initialise MPI with "
                            "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...))");
  }
  thread_multiple_ = provided >= MPI_THREAD_MULTIPLE;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(version, &len);
  version_.assign(version, static_cast<size_t>(len));
  if (size_t nl = version_.find('\n'); nl != std::string::npos) version_.resize(nl);
  if (size_t comma = version_.find(','); comma != std::string::npos) version_.resize(comma);
  void* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  if (flag && ub != nullptr) {
    const long long max_tag = *static_cast<int*>(ub);
    tag_bits_ = 0;
    while (tag_bits_ < 31 && (1ll << (tag_bits_ + 1)) - 1 <= max_tag) ++tag_bits_;
  }
  CreateOps<DataType::kFloat16>(user_ops_[0]);
  CreateOps<DataType::kBFloat16>(user_ops_[1]);
  CreateOps<DataType::kBool>(user_ops_[2]);
  CreateOps<DataType::kUInt8>(user_ops_[3]);
  CreateOps<DataType::kInt8>(user_ops_[4]);
  return Status::Ok();
}

Result<MPI_Comm> Library::DupWorld(const char* what) {
  MutexLock lock(mu_);
  MPI_Comm comm = MPI_COMM_NULL;
  const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rc != MPI_SUCCESS) {
    return UnavailableError("rank " + std::to_string(rank_) + ": MPI_Comm_dup for the " + what +
                            " failed: " + MpiErrorString(rc));
  }
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return comm;
}

MPI_Datatype Library::Datatype(DataType dtype) const {
  switch (dtype) {
    case DataType::kUInt8:
    case DataType::kBool:
      return MPI_UINT8_T;
    case DataType::kInt8:
      return MPI_INT8_T;
    case DataType::kInt16:
      return MPI_INT16_T;
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kInt64:
      return MPI_INT64_T;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return MPI_UINT16_T;
    case DataType::kFloat32:
      return MPI_FLOAT;
    case DataType::kFloat64:
      return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

MPI_Op Library::Op(DataType dtype, ReduceOp op) const {
  switch (dtype) {
    case DataType::kFloat16:
      return user_ops_[0][OpIndex(op)];
    case DataType::kBFloat16:
      return user_ops_[1][OpIndex(op)];
    case DataType::kBool:
      return user_ops_[2][OpIndex(op)];
    case DataType::kUInt8:
      return user_ops_[3][OpIndex(op)];
    case DataType::kInt8:
      return user_ops_[4][OpIndex(op)];
    default:
      break;
  }
  switch (op) {
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kProduct:
      return MPI_PROD;
    default:
      return MPI_SUM;
  }
}

Result<std::unique_ptr<Transport>> Library::CreateTransport() {
  HORA_ASSIGN_OR_RETURN(MPI_Comm comm, DupWorld("transport"));
  return NewMpiTransport(comm, mu_, tag_bits_);
}

}  // namespace hora::mpi

// The plugin's one exported symbol (mpi_plugin.h).
extern "C" __attribute__((visibility("default"))) hora::MpiLibrary* hora_mpi_plugin_open(
    int abi_version, std::string* error) {
  if (abi_version != hora::kMpiPluginAbiVersion) {
    *error = "plugin interface version " + std::to_string(hora::kMpiPluginAbiVersion) +
             " does not match Hora's " + std::to_string(abi_version) + " (stale build?)";
    return nullptr;
  }
  return hora::mpi::Library::Open(error);
}
