// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "torch_peer.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "net/socket.h"
#include "net_util.h"

extern char** environ;

namespace hora::bench {
namespace {

std::string ScriptPath() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : "";
  dir = dir.substr(0, dir.rfind('/') + 1);
  return dir + "hora-bench-torch-peer.py";
}

// Runs argv with `extra` added to the environment; waits up to `limit`.
Status RunBounded(const std::vector<std::string>& argv, const std::vector<std::string>& extra,
                  std::chrono::seconds limit) {
  std::vector<std::string> env = extra;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cargv.push_back(nullptr);
  cenv.push_back(nullptr);
  pid_t pid = 0;
  // posix_spawnp (PATH lookup for --python): no code of ours runs between fork and exec.
  if (posix_spawnp(&pid, cargv[0], nullptr, nullptr, cargv.data(), cenv.data()) != 0)
    return UnavailableError("cannot start '" + argv[0] + "'");
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return TimeoutError("the torch peer did not finish within " + std::to_string(limit.count()) +
                          " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return UnavailableError("the torch peer failed (exit status " +
                            std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                            "; its stderr is above)");
  return Status::Ok();
}

// A free port on this host (rank 0 serves torch's store there).
Result<uint16_t> FreePort(const std::string& host) {
  HORA_ASSIGN_OR_RETURN(net::Fd fd, net::Listen(host, 0, 1));
  return net::LocalPort(fd);
}

}  // namespace

Result<std::vector<Record>> RunTorchPeer(Session& s, const Args& a,
                                         const std::vector<uint64_t>& sizes, double timeout_s) {
  std::string master;
  Status local;
  if (s.rank() == 0) {
    auto host = ReachableAddress(s);
    auto port = host.ok() ? FreePort(*host) : Result<uint16_t>(host.status());
    if (port.ok()) master = *host + ":" + std::to_string(*port);
  }
  HORA_ASSIGN_OR_RETURN(master, BroadcastText(s, master, 0));
  if (master.empty()) return UnavailableError("torch peer: rank 0 found no address to serve at");
  const auto colon = master.rfind(':');

  char path[] = "/tmp/hora-bench-torch-XXXXXX";
  const int fd = mkstemp(path);
  if (fd >= 0) close(fd);
  std::ostringstream size_list;
  for (size_t i = 0; i < sizes.size(); ++i) size_list << (i ? "," : "") << sizes[i];
  std::vector<std::string> argv = {a.python,        ScriptPath(),
                                   "--collective",  CollectiveName(a.collective),
                                   "--sizes",       size_list.str(),
                                   "--dtype",       DataTypeName(a.dtype),
                                   "--op",          ReduceOpName(a.op),
                                   "--iters",       std::to_string(a.iters),
                                   "--iters-small", std::to_string(a.iters_small),
                                   "--warmup",      std::to_string(a.warmup),
                                   "--root",        std::to_string(a.root),
                                   "--timeout",     std::to_string(timeout_s),
                                   "--out",         path};
  if (a.inplace) argv.push_back("--inplace");
  if (a.check) argv.push_back("--check");
  const std::vector<std::string> env = {
      "RANK=" + std::to_string(s.rank()), "WORLD_SIZE=" + std::to_string(s.size()),
      "MASTER_ADDR=" + master.substr(0, colon), "MASTER_PORT=" + master.substr(colon + 1),
      "OMP_NUM_THREADS=1"};
  if (fd < 0) {
    local = UnavailableError("torch peer: cannot create a temporary file");
  } else {
    const auto limit = std::chrono::seconds(120 + 10 * static_cast<int>(sizes.size()) +
                                            static_cast<int>(timeout_s));
    local = RunBounded(argv, env, limit);
  }
  // Every rank learns whether any failed.
  double failed = local.ok() ? 0 : 1, any = 0;
  HORA_RETURN_IF_ERROR(s.Allreduce(TensorView::Flat(&failed, DataType::kFloat64, 1),
                                   TensorView::Flat(&any, DataType::kFloat64, 1),
                                   {ReduceOp::kMax}));
  std::vector<Record> records;
  if (local.ok() && any == 0 && s.rank() == 0) {
    std::ifstream f(path);
    std::stringstream text;
    text << f.rdbuf();
    HORA_ASSIGN_OR_RETURN(records, RecordsFromJson(text.str()));
  }
  unlink(path);
  if (!local.ok()) return local.WithContext("rank " + std::to_string(s.rank()));
  if (any != 0) return UnavailableError("the torch peer failed on another rank");
  return records;
}

}  // namespace hora::bench
