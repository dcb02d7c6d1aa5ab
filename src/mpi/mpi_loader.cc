// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "mpi/mpi_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <utility>
#include <vector>

namespace hora {
namespace {

// Directory of the binary or shared library that holds this function.
std::string DirectoryOfHoraCode() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&DirectoryOfHoraCode), &info) == 0 ||
      info.dli_fname == nullptr) {
    return ".";
  }
  std::string path = info.dli_fname;
  if (path.find('/') == std::string::npos) {  // the main program, found on PATH
    char self[4096] = {};
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) path.assign(self, static_cast<size_t>(n));
  }
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

std::string MpiFlavourFromEnv(const std::map<std::string, std::string>& env) {
  if (env.count("OMPI_COMM_WORLD_SIZE")) return "openmpi";
  if (env.count("PMI_SIZE") || env.count("PMI_RANK") || env.count("MPI_LOCALNRANKS"))
    return "mpich";
  // PMIx without OpenMPI's variables: srun --mpi=pmix, whose usual client
  // is OpenMPI.
  if (env.count("PMIX_RANK")) return "openmpi";
  return "";
}

namespace {

// dlopens the plugin for this job (the same handle on every call) and
// returns it with its path.
Result<std::pair<void*, std::string>> OpenPlugin(const Config& config,
                                                 const std::map<std::string, std::string>& env) {
  std::vector<std::string> candidates;
  if (!config.mpi_plugin.empty()) {
    candidates.push_back(config.mpi_plugin);
  } else {
    const std::string flavour = MpiFlavourFromEnv(env);
    if (flavour.empty()) {
      return UnavailableError(
          "HORA_TRANSPORT=mpi / HORA_BACKEND=mpi or mpi-blocking: this process was not started by "
          "an MPI "
          "launcher (no OMPI_COMM_WORLD_* or PMI_* variables); start it with mpirun, or "
          "horarun --mpi, or name the plugin in HORA_MPI_PLUGIN");
    }
    const std::string file = "libhora-mpi-" + flavour + ".so";
    const std::string dir = DirectoryOfHoraCode();
    candidates = {dir + "/" + file, dir + "/../lib/" + file};
  }
  std::string tried;
  for (const std::string& path : candidates) {
    if (access(path.c_str(), R_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + path + " (not found)";
      continue;
    }
    // RTLD_GLOBAL: OpenMPI's own components, which it dlopens, resolve
    // symbols of libmpi through the global scope.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      return UnavailableError("cannot load the MPI plugin " + path + ": " +
                              (why ? why : "unknown error"));
    }
    return std::make_pair(handle, path);
  }
  return UnavailableError("no Hora MPI plugin found: tried " + tried +
                          " (was Hora built with this MPI installed? set HORA_MPI_PLUGIN)");
}

}  // namespace

Result<MpiLibrary*> LoadMpiPlugin(const Config& config,
                                  const std::map<std::string, std::string>& env) {
  HORA_ASSIGN_OR_RETURN(auto plugin, OpenPlugin(config, env));
  const auto& [handle, path] = plugin;
  auto open = reinterpret_cast<MpiPluginOpenFn>(dlsym(handle, kMpiPluginOpenSymbol));
  if (open == nullptr) {
    return UnavailableError(path + " is not a Hora MPI plugin (no " + kMpiPluginOpenSymbol + ")");
  }
  std::string error;
  MpiLibrary* library = open(kMpiPluginAbiVersion, &error);
  if (library == nullptr) return UnavailableError(path + ": " + error);
  return library;
}

Result<MpiBootstrap*> LoadMpiBootstrap(const Config& config,
                                       const std::map<std::string, std::string>& env) {
  HORA_ASSIGN_OR_RETURN(auto plugin, OpenPlugin(config, env));
  const auto& [handle, path] = plugin;
  auto open = reinterpret_cast<MpiBootstrapOpenFn>(dlsym(handle, kMpiBootstrapSymbol));
  if (open == nullptr) {
    return UnavailableError(path + " predates the MPI bootstrap (no " + kMpiBootstrapSymbol +
                            "): rebuild Hora's MPI plugin");
  }
  std::string error;
  MpiBootstrap* bootstrap = open(kMpiBootstrapVersion, &error);
  if (bootstrap == nullptr) return UnavailableError(path + ": " + error);
  return bootstrap;
}

}  // namespace hora
