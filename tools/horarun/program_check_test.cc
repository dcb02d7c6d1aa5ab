// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "program_check.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace hora::horarun {
namespace {

class ProgramCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hora-program-check-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    char cwd[4096];
    ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
    old_cwd_ = cwd;
    ASSERT_EQ(chdir(dir_.c_str()), 0);
    Write("ar.py", 0644);
    Write("run.sh", 0755);
    mkdir("sub", 0755);
  }
  void TearDown() override {
    (void)!chdir(old_cwd_.c_str());
    std::remove((dir_ + "/ar.py").c_str());
    std::remove((dir_ + "/run.sh").c_str());
    rmdir((dir_ + "/sub").c_str());
    rmdir(dir_.c_str());
  }
  void Write(const std::string& name, mode_t mode) {
    FILE* f = std::fopen(name.c_str(), "w");
    std::fputs("print('hi')\n", f);
    std::fclose(f);
    chmod(name.c_str(), mode);
  }
  static std::string Error(const std::string& program, const std::string& path) {
    Status st = CheckProgram(program, path);
    return st.ok() ? "ok" : st.message();
  }
  std::string dir_, old_cwd_;
};

TEST_F(ProgramCheck, SaysWhyAProgramCannotStart) {
  EXPECT_EQ(Error("ar.py", "/usr/bin:/bin"),
            "ar.py is not executable; run it with python3 ar.py, or chmod +x ar.py");
  EXPECT_EQ(Error("./ar.py", "/usr/bin:/bin"),
            "./ar.py is not executable; run it with python3 ./ar.py, or chmod +x ./ar.py");
  EXPECT_EQ(Error("run.sh", "/usr/bin:/bin"),
            "run.sh is in the current directory, which is not on PATH: run ./run.sh");
  EXPECT_EQ(Error("./run.sh", "/usr/bin:/bin"), "ok");
  EXPECT_EQ(Error("run.sh", "/usr/bin::/bin"), "ok");  // an empty entry: the current directory
  EXPECT_EQ(Error(dir_ + "/run.sh", ""), "ok");
  EXPECT_EQ(Error("sh", "/usr/bin:/bin"), "ok");
  EXPECT_EQ(Error("no-such-program", "/usr/bin:/bin"),
            "no-such-program was not found (not on PATH, nor in the current directory)");
  EXPECT_EQ(Error("./missing.py", "/usr/bin"), "./missing.py was not found");
  EXPECT_EQ(Error("./sub", "/usr/bin"), "./sub is a directory, not a program");
}

}  // namespace
}  // namespace hora::horarun
