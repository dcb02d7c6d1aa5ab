// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "mpi_launch.h"

#include <gtest/gtest.h>

#include "options.h"

namespace hora::horarun {
namespace {

Result<std::string> NoFile(const std::string&) { return InvalidArgument("no files here"); }

TEST(MpiLaunch, TellsTheFlavourFromVersionText) {
  EXPECT_EQ(*MpiFlavourFromVersion("mpirun", "mpirun (Open MPI) 4.1.4\n\nReport bugs to ..."),
            MpiFlavour::kOpenMpi);
  EXPECT_EQ(*MpiFlavourFromVersion("mpirun", "HYDRA build details:\n    Version: 4.0.2\n"),
            MpiFlavour::kMpich);
  auto other = MpiFlavourFromVersion("/opt/x/mpirun", "Intel(R) MPI Library 2021\n");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("/opt/x/mpirun"), std::string::npos);
  EXPECT_NE(other.status().message().find("Intel(R) MPI Library 2021"), std::string::npos);
}

TEST(MpiLaunch, OpenMpiCommandLine) {
  MpirunSpec spec;
  spec.mpirun = "mpirun.openmpi";
  spec.flavour = MpiFlavour::kOpenMpi;
  spec.np = 3;
  spec.hosts = {{"a", 2}, {"b", 2}};
  spec.forward = {"HORA_SECRET", "HORA_STORE_ADDR"};
  spec.as_root = true;
  spec.command = {"python3", "train.py"};
  const std::vector<std::string> want = {
      "mpirun.openmpi",  "-np",       "3",           "-H",
      "a:2,b:2",         "--bind-to", "none",        "--allow-run-as-root",
      "--tag-output",    "-x",        "HORA_SECRET", "-x",
      "HORA_STORE_ADDR", "python3",   "train.py"};
  EXPECT_EQ(MpirunCommand(spec), want);
  spec.as_root = false;
  spec.prefix_output = false;
  spec.forward.clear();
  const std::vector<std::string> plain = {"mpirun.openmpi", "-np",  "3",       "-H",      "a:2,b:2",
                                          "--bind-to",      "none", "python3", "train.py"};
  EXPECT_EQ(MpirunCommand(spec), plain);
}

TEST(MpiLaunch, MpichCommandLine) {
  MpirunSpec spec;
  spec.mpirun = "mpirun.mpich";
  spec.flavour = MpiFlavour::kMpich;
  spec.np = 2;
  spec.hosts = {{"localhost", 2}};
  spec.forward = {"HORA_SECRET", "HORA_TRANSPORT"};
  spec.as_root = true;  // Hydra has no such switch
  spec.command = {"./worker"};
  const std::vector<std::string> want = {
      "mpirun.mpich", "-np",           "2",         "-hosts",
      "localhost:2",  "-prepend-rank", "-genvlist", "HORA_SECRET,HORA_TRANSPORT",
      "./worker"};
  EXPECT_EQ(MpirunCommand(spec), want);
}

TEST(MpiLaunch, MissingMpirunIsAClearError) {
  auto r = DetectMpirun("/nonexistent/mpirun");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/mpirun"), std::string::npos)
      << r.status().message();
}

TEST(MpiLaunch, OptionsSelectMpi) {
  auto o = ParseOptions({"-np", "2", "--transport", "mpi", "./a"}, &NoFile);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->mpi);  // only an MPI launcher provides the MPI transport
  EXPECT_EQ(o->mpirun, "mpirun");
  o = ParseOptions({"-np", "2", "--mpirun", "mpirun.mpich", "./a"}, &NoFile);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->mpi);
  EXPECT_EQ(o->mpirun, "mpirun.mpich");
  EXPECT_EQ(o->transport, "");
  o = ParseOptions({"-np", "2", "./a"}, &NoFile);
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o->mpi);
  o = ParseOptions({"-np", "2", "--bind-to", "core", "./a"}, &NoFile);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->bind_to, "core");
  auto bad_bind = ParseOptions({"-np", "2", "--bind-to", "socket", "./a"}, &NoFile);
  ASSERT_FALSE(bad_bind.ok());
  EXPECT_NE(bad_bind.status().message().find("'socket' is not one of core, none"),
            std::string::npos);
  auto bad = ParseOptions({"-np", "2", "--transport", "ib", "./a"}, &NoFile);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'ib' is not one of shm, tcp, mpi"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace hora::horarun
