// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "environment.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace hora::horarun {
namespace {

TEST(Environment, ForwardsAllButHostAndShellNamesAndSecrets) {
  const std::map<std::string, std::string> env = {
      {"PATH", "/opt/bin:/usr/bin"},
      {"PYTHONPATH", "/src"},
      {"LD_LIBRARY_PATH", "/opt/lib"},
      {"OMP_NUM_THREADS", "4"},
      {"MY_SETTING", "a b\nc"},
      {"HORA_CYCLE_TIME_MS", "2"},
      {"BASH_FUNC_module%%", "() { :; }"},
      {"OLDPWD", "/x"},
      {"CUDA_VISIBLE_DEVICES", "0,1"},
      {"HIP_CUDA_VISIBLE_DEVICES", "0"},
      {"_HOROVOD_SECRET_KEY", "k"},
      {"HORA_SECRET", "s"},
      {"PWD", "/here"},
      {"SHLVL", "2"},
      {"_", "/usr/bin/horarun"},
      {"HOSTNAME", "driver"},
      {"SSH_AUTH_SOCK", "/tmp/agent"},
      {"BAD-NAME", "1"},
  };
  const std::map<std::string, std::string> want = {
      {"PATH", "/opt/bin:/usr/bin"}, {"PYTHONPATH", "/src"},   {"LD_LIBRARY_PATH", "/opt/lib"},
      {"OMP_NUM_THREADS", "4"},      {"MY_SETTING", "a b\nc"}, {"HORA_CYCLE_TIME_MS", "2"},
  };
  EXPECT_EQ(ForwardedEnvironment(env), want);
}

TEST(Environment, DashXSetsOrForwardsOneName) {
  const std::map<std::string, std::string> env = {{"CUDA_VISIBLE_DEVICES", "3"}, {"A", "1"}};
  auto x = ExportedVariables({"CUDA_VISIBLE_DEVICES", "B=2", "A", "A=override", "C="}, env);
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  const std::map<std::string, std::string> want = {
      {"CUDA_VISIBLE_DEVICES", "3"}, {"B", "2"}, {"A", "override"}, {"C", ""}};
  EXPECT_EQ(*x, want);
  auto missing = ExportedVariables({"NOPE"}, env);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "-x NOPE: NOPE is not set in horarun's environment (give -x NOPE=VALUE to set it)");
}

}  // namespace
}  // namespace hora::horarun
