// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The loader's choices and errors. Loading a real plugin initialises MPI, so
// that is exercised by the tests under mpirun (tests/mp/mpirun_test.sh).
#include "mpi/mpi_loader.h"

#include <gtest/gtest.h>

#include "hora/session.h"
#include "hora/thread_world.h"

namespace hora {
namespace {

Config DefaultConfig() { return *ConfigFromEnv({}); }

TEST(MpiLoader, FlavourFromLauncherVariables) {
  EXPECT_EQ(MpiFlavourFromEnv({{"OMPI_COMM_WORLD_SIZE", "4"}}), "openmpi");
  EXPECT_EQ(MpiFlavourFromEnv({{"PMI_SIZE", "4"}, {"PMI_RANK", "1"}}), "mpich");
  EXPECT_EQ(MpiFlavourFromEnv({{"RANK", "1"}, {"WORLD_SIZE", "2"}}), "");
  EXPECT_EQ(MpiFlavourFromEnv({{"PMIX_RANK", "1"}}), "openmpi");  // srun --mpi=pmix
  EXPECT_EQ(MpiFlavourFromEnv({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}}), "");
}

TEST(MpiLoader, NoMpiLauncherIsAClearError) {
  auto lib = LoadMpiPlugin(DefaultConfig(), {{"HORA_RANK", "0"}});
  ASSERT_FALSE(lib.ok());
  EXPECT_NE(lib.status().message().find("not started by an MPI launcher"), std::string::npos)
      << lib.status().message();
}

TEST(MpiLoader, MissingPluginNamesThePath) {
  Config c = DefaultConfig();
  c.mpi_plugin = "/nonexistent/libhora-mpi-x.so";
  auto lib = LoadMpiPlugin(c, {});
  ASSERT_FALSE(lib.ok());
  EXPECT_NE(lib.status().message().find("/nonexistent/libhora-mpi-x.so (not found)"),
            std::string::npos)
      << lib.status().message();
}

TEST(MpiLoader, NotAPluginIsRefused) {
  Config c = DefaultConfig();
  c.mpi_plugin = "/lib/x86_64-linux-gnu/libm.so.6";  // loads, but has no entry point
  auto lib = LoadMpiPlugin(c, {});
  ASSERT_FALSE(lib.ok());
  EXPECT_NE(lib.status().message().find("is not a Hora MPI plugin"), std::string::npos)
      << lib.status().message();
}

TEST(MpiLoader, BootstrapOfAPluginWithoutItIsNamed) {
  // A library with neither entry point stands for a plugin built before
  // the bootstrap's: the loader says so, and calls nothing.
  Config c = DefaultConfig();
  c.mpi_plugin = "/lib/x86_64-linux-gnu/libm.so.6";
  auto bootstrap = LoadMpiBootstrap(c, {});
  ASSERT_FALSE(bootstrap.ok());
  EXPECT_NE(bootstrap.status().message().find(
                "predates the MPI bootstrap (no hora_mpi_plugin_bootstrap): rebuild"),
            std::string::npos)
      << bootstrap.status().message();
}

TEST(MpiLoader, MpiBackendNeedsProcesses) {
  auto world = ThreadWorld::Create(2);
  SessionOptions o;
  o.world = world;
  o.rank = 0;
  o.read_environment = false;
  o.settings = {{"HORA_BACKEND", "mpi"}};
  auto s = Session::Create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("HORA_BACKEND=mpi needs ranks as processes"),
            std::string::npos)
      << s.status().message();
}

TEST(MpiLoader, UnknownBackendNamesTheChoices) {
  auto c = ConfigFromEnv({{"HORA_BACKEND", "gloo"}});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("hora|mpi"), std::string::npos) << c.status().message();
}

}  // namespace
}  // namespace hora
