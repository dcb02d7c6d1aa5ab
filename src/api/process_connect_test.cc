// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
// Errors ConnectProcess gives before it reaches any other process: each names
// the variable and value at fault. (Wiring that succeeds is exercised by the
// multi-process tests under horarun, mpirun and torchrun.)
#include "api/process_connect.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <string>

#include "api/rendezvous.h"
#include "launch/rank_layout.h"
#include "launch/slurm.h"

namespace hora {
namespace {

Status Connect(std::map<std::string, std::string> env) {
  env.emplace("HORA_START_TIMEOUT_S", "1");
  auto config = ConfigFromEnv(env);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  if (!config.ok()) return config.status();
  Logger logger(LogLevel::kOff, -1);
  return ConnectProcess(*config, env, logger).status();
}

const std::map<std::string, std::string> kTorchrun = {
    {"RANK", "1"},       {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
    {"GROUP_RANK", "0"}, {"HORA_SECRET", "s"}};

TEST(ProcessWiring, TorchrunMasterPortMustBeAPort) {
  for (const char* port : {"", "abc", "12x", "0", "65535", "-3", " 29500", "+29500"}) {
    auto env = kTorchrun;
    env["MASTER_ADDR"] = "127.0.0.1";
    env["MASTER_PORT"] = port;
    Status s = Connect(env);
    ASSERT_FALSE(s.ok()) << port;
    EXPECT_NE(s.message().find(std::string("MASTER_PORT='") + port + "'"), std::string::npos)
        << s.message();
  }
}

TEST(ProcessWiring, TorchrunStoreIsOnePortAboveMasterPort) {
  // Nobody serves the store (this is rank 1): the timeout error names the
  // address the rank tried, MASTER_PORT + 1, bracketed for an IPv6 host.
  for (auto [addr, want] : {std::pair<std::string, std::string>{"127.0.0.1", "127.0.0.1:1001"},
                            {"::1", "[::1]:1001"}}) {
    auto env = kTorchrun;
    env["MASTER_ADDR"] = addr;
    env["MASTER_PORT"] = "1000";
    Status s = Connect(env);
    ASSERT_FALSE(s.ok()) << addr;
    EXPECT_NE(s.message().find(want), std::string::npos) << s.message();
  }
}

TEST(ProcessWiring, MissingAddressOrSecretIsNamed) {
  auto env = kTorchrun;
  Status no_addr = Connect(env);
  ASSERT_FALSE(no_addr.ok());
  EXPECT_NE(no_addr.message().find("rank 1 of 2 (layout from torchrun): no rendezvous address"),
            std::string::npos)
      << no_addr.message();
  // It lists what Hora starts by itself under.
  for (const char* launcher : {"horarun", "mpirun (OpenMPI or MPICH", "srun", "torchrun",
                               "HORA_STORE_ADDR=host:port", "HORA_SECRET"}) {
    EXPECT_NE(no_addr.message().find(launcher), std::string::npos) << launcher;
  }
  // HORA_RANK and HORA_SIZE (horarun's, or set by hand) are named as such.
  const Status by_hand = Connect({{"HORA_RANK", "0"}, {"HORA_SIZE", "2"}, {"HORA_SECRET", "s"}});
  EXPECT_NE(by_hand.message().find("rank 0 of 2 (layout from HORA_RANK and HORA_SIZE): no "
                                   "rendezvous address"),
            std::string::npos)
      << by_hand.message();
  env.erase("HORA_SECRET");
  env["HORA_STORE_ADDR"] = "127.0.0.1:1";
  Status no_secret = Connect(env);
  ASSERT_FALSE(no_secret.ok());
  EXPECT_NE(no_secret.message().find("HORA_SECRET is not set"), std::string::npos)
      << no_secret.message();
}

// srun without MPI: the store is on the step's first host at the port
// derived from the job and step, and the secret comes through the home.
std::map<std::string, std::string> Slurm(int rank, const std::string& home) {
  return {{"SLURM_PROCID", std::to_string(rank)},
          {"SLURM_NTASKS", "2"},
          {"SLURM_LOCALID", "0"},
          {"SLURM_NTASKS_PER_NODE", "1"},
          {"SLURM_NODEID", std::to_string(rank)},
          {"SLURM_NNODES", "2"},
          {"SLURM_JOB_ID", "777"},
          {"SLURM_STEP_ID", "3"},
          {"SLURM_STEP_NODELIST", "127.0.0.[1-2]"},
          {"HOME", home}};
}

TEST(ProcessWiring, SlurmStoreIsOnTheStepsFirstHostAtTheDerivedPort) {
  auto env = Slurm(1, "/nonexistent-home");
  env["HORA_SECRET"] = "s";  // so that only the address is derived
  Status s = Connect(env);
  ASSERT_FALSE(s.ok());
  const std::string want = "127.0.0.1:" + std::to_string(*SlurmStorePort("777", "3"));
  EXPECT_NE(s.message().find(want), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("the first host of the Slurm step"), std::string::npos) << s.message();
}

TEST(ProcessWiring, SlurmRankWithoutRankZeroNamesTheSecretFileAndSharedHome) {
  auto env = Slurm(1, "/tmp/hora-no-such-home");
  const TimePoint start = Clock::now();
  Status s = Connect(env);  // HORA_START_TIMEOUT_S=1
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.message();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(s.message().find("waiting for rank 0's job secret within HORA_START_TIMEOUT_S=1 s"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("/tmp/hora-no-such-home/.hora/jobs/777.3-"), std::string::npos);
  EXPECT_NE(s.message().find("which every host must share"), std::string::npos);
}

TEST(ProcessWiring, TorchrunInASlurmStepNamesItsSecretByRunRestartAndHost) {
  // One torchrun a node in a step (srun ... torchrun --nnodes 1): each runs
  // a job of its own at 127.0.0.1:MASTER_PORT, with the same job, step and
  // port; their secret files differ by run id, restart and host.
  auto env = Slurm(0, "/tmp/hora-no-such-home");
  env.insert({{"RANK", "1"},
              {"WORLD_SIZE", "2"},
              {"LOCAL_RANK", "1"},
              {"LOCAL_WORLD_SIZE", "2"},
              {"GROUP_RANK", "0"},
              {"MASTER_ADDR", "127.0.0.1"},
              {"MASTER_PORT", "29500"},
              {"TORCHELASTIC_RUN_ID", "run7"},
              {"TORCHELASTIC_RESTART_COUNT", "2"}});
  Status s = Connect(env);  // (torchrun's rank 1: waits for rank 0's file)
  ASSERT_FALSE(s.ok());
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string want =
      "/tmp/hora-no-such-home/.hora/jobs/777.3-29501-run7-r2-" + std::string(host);
  EXPECT_NE(s.message().find(want), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("under torchrun"), std::string::npos) << s.message();
}

TEST(ProcessWiring, SlurmRankZeroMustBeOnTheFirstHost) {
  auto env = Slurm(0, "/tmp");
  env["SLURM_NODEID"] = "1";
  env["SLURM_NTASKS_PER_NODE"] = "1";
  env["HORA_SECRET"] = "s";
  Status s = Connect(env);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank 0 runs on Slurm node 1, not on the step's first host"),
            std::string::npos)
      << s.message();
}

bool MpiCarries(const std::map<std::string, std::string>& env) {
  auto config = ConfigFromEnv(env);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  auto layout = RankLayoutFromEnv(env);
  EXPECT_TRUE(layout.ok()) << layout.status().ToString();
  return config.ok() && layout.ok() && MpiCarriesRendezvous(*config, env, layout->source);
}

TEST(ProcessWiring, UnderSrunMpiCarriesTheRendezvousOnlyForAJobThatUsesMpi) {
  // A cluster whose default MPI plugin is pmix or pmi2: srun sets PMIX_RANK
  // or PMI_RANK for every task, also of a job that never uses MPI.
  for (const char* pmi : {"PMIX_RANK", "PMI_RANK"}) {
    auto env = Slurm(1, "/tmp");
    env[pmi] = "1";
    EXPECT_FALSE(MpiCarries(env)) << pmi;
    for (auto [name, value] : {std::pair<std::string, std::string>{"HORA_TRANSPORT", "mpi"},
                               {"HORA_BACKEND", "mpi"},
                               {"HORA_BACKEND", "mpi-blocking"}}) {
      auto mpi_job = env;
      mpi_job[name] = value;
      EXPECT_TRUE(MpiCarries(mpi_job)) << pmi << " " << name << "=" << value;
    }
    auto other = env;
    other["HORA_TRANSPORT"] = "tcp";
    EXPECT_FALSE(MpiCarries(other)) << pmi;
  }
  // mpirun: MPI carries it whatever the job uses; no MPI launcher: never.
  EXPECT_TRUE(MpiCarries({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}}));
  EXPECT_TRUE(MpiCarries({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}));
  EXPECT_FALSE(MpiCarries(Slurm(1, "/tmp")));
  EXPECT_FALSE(MpiCarries(kTorchrun));
  // torchrun under mpirun: its workers inherit mpirun's variables, but
  // mpirun did not start them (MPI_Init there aborts).
  auto torchrun_under_mpirun = kTorchrun;
  torchrun_under_mpirun.insert(
      {{"OMPI_COMM_WORLD_SIZE", "1"}, {"OMPI_COMM_WORLD_RANK", "0"}, {"TORCHELASTIC_RUN_ID", "r"}});
  EXPECT_FALSE(MpiCarries(torchrun_under_mpirun));
  torchrun_under_mpirun["HORA_TRANSPORT"] = "mpi";
  EXPECT_FALSE(MpiCarries(torchrun_under_mpirun));
}

TEST(ProcessWiring, SrunWithPmixVariablesMeetsOnTheStepsFirstHost) {
  // As SlurmStoreIsOnTheStepsFirstHostAtTheDerivedPort, with PMIX_RANK set
  // (srun --mpi=pmix by default): no MPI is involved.
  auto env = Slurm(1, "/nonexistent-home");
  env["PMIX_RANK"] = "1";
  env["HORA_SECRET"] = "s";
  env["HORA_MPI_PLUGIN"] = "/nonexistent/libhora-mpi-openmpi.so";
  Status s = Connect(env);
  ASSERT_FALSE(s.ok());
  const std::string want = "127.0.0.1:" + std::to_string(*SlurmStorePort("777", "3"));
  EXPECT_NE(s.message().find(want), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("MPI"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace hora
