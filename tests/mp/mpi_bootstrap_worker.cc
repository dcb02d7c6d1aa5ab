// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Two ranks under mpirun, on the MPI plugin's bootstrap, with rank 0 late:
//
//   hora-mp-bootstrap-worker PLUGIN abandon
//     rank 1's broadcast times out. The timed-out request stays pending in
//     MPI, so the bootstrap must refuse every later broadcast at once
//     (instead of starting another collective over the abandoned one), and
//     the process must still exit promptly (MPI is not finalised over a
//     pending collective). Rank 0 joins late and must fail or succeed
//     within its own timeout, never hang.
//   hora-mp-bootstrap-worker PLUGIN deadline
//     rank 0 joins the rendezvous (JoinRendezvous, HORA_START_TIMEOUT_S=3);
//     rank 1 starts MPI 2 s late and never broadcasts. MPI's start and the
//     broadcast share one deadline: rank 0 fails within the 3 s, not after
//     2 s + 3 s.
//
// Each rank prints "rank R: bootstrap checks passed", or names a failure.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "api/process_connect.h"
#include "api/rendezvous.h"
#include "launch/rank_layout.h"
#include "mpi/mpi_loader.h"

namespace {

using namespace hora;

int Fail(int rank, const std::string& what) {
  std::fprintf(stderr, "FAIL rank %d: %s\n", rank, what.c_str());
  return 1;
}

void Passed(int rank) {
  std::printf("rank %d: bootstrap checks passed\n", rank);
  std::fflush(stdout);
}

int OneDeadline(MpiBootstrap& mpi, const std::string& plugin) {
  auto env = ReadWholeEnvironment();
  env["HORA_MPI_PLUGIN"] = plugin;
  env["HORA_START_TIMEOUT_S"] = "3";
  Result<RankLayout> layout = RankLayoutFromEnv(env);
  if (!layout.ok()) return Fail(-1, layout.status().ToString());
  if (layout->rank == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    Result<MpiLibrary*> lib = mpi.Open(std::chrono::seconds(60));
    if (!lib.ok()) return Fail(1, lib.status().ToString());
    Passed(1);
    std::this_thread::sleep_for(std::chrono::seconds(5));
    std::_Exit(0);  // rank 0 left without MPI_Finalize: none here either
  }
  Result<Config> config = ConfigFromEnv(env);
  if (!config.ok()) return Fail(0, config.status().ToString());
  Logger logger(LogLevel::kOff, -1);
  const auto start = std::chrono::steady_clock::now();
  Result<Rendezvous> rv = JoinRendezvous(*config, env, *layout, logger);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rank 0: rendezvous after %.1f s: %s\n", took, rv.status().ToString().c_str());
  if (rv.ok()) return Fail(0, "the rendezvous succeeded without rank 1's broadcast");
  if (took > 4.2) return Fail(0, "took more than HORA_START_TIMEOUT_S=3 in all");
  Passed(0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 3 ? argv[2] : "";
  if (mode != "abandon" && mode != "deadline") {
    std::printf("usage: mpirun -np 2 %s PLUGIN abandon|deadline (PLUGIN: a libhora-mpi-*.so)\n",
                argv[0]);
    return argc == 2 && argv[1][0] == '-' ? 0 : 2;
  }
  Result<Config> config = ConfigFromEnv({{"HORA_MPI_PLUGIN", argv[1]}});
  if (!config.ok()) return Fail(-1, config.status().ToString());
  Result<MpiBootstrap*> mpi = LoadMpiBootstrap(*config, {});
  if (!mpi.ok()) return Fail(-1, mpi.status().ToString());
  if (mode == "deadline") return OneDeadline(**mpi, argv[1]);
  Result<MpiLibrary*> lib = (*mpi)->Open(std::chrono::seconds(60));
  if (!lib.ok()) return Fail(-1, lib.status().ToString());
  const int rank = (*lib)->rank();
  if ((*lib)->size() != 2) return Fail(rank, "run with -np 2");
  std::string message = rank == 0 ? "from rank 0" : "";
  if (rank == 1) {
    Status first = (*mpi)->Broadcast(&message, 0, std::chrono::milliseconds(300));
    if (first.code() != StatusCode::kTimeout) {
      return Fail(rank, "want a timeout while rank 0 is late, got " + first.ToString());
    }
    const auto start = std::chrono::steady_clock::now();
    Status again = (*mpi)->Broadcast(&message, 0, std::chrono::seconds(5));
    const auto took = std::chrono::steady_clock::now() - start;
    if (again.ok() ||
        again.message().find("not usable after an earlier failure") == std::string::npos) {
      return Fail(rank, "want a refusal after the timeout, got " + again.ToString());
    }
    if (took > std::chrono::milliseconds(100)) return Fail(rank, "the refusal was not at once");
    Passed(1);
    // Stay until rank 0 has had its try: a launcher may end the job when
    // one rank leaves without MPI_Finalize.
    std::this_thread::sleep_for(std::chrono::seconds(3));
    return 0;
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  Status late = (*mpi)->Broadcast(&message, 0, std::chrono::seconds(1));
  std::printf("rank 0: late broadcast: %s\n", late.ToString().c_str());
  Passed(0);
  return 0;
}
