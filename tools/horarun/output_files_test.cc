// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "output_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

namespace hora::horarun {
namespace {

TEST(OutputFiles, RankFoldersArePaddedAsHorovodrunsGlooMode) {
  EXPECT_EQ(RankOutputDir("out", 0, 1), "out/rank.0");
  EXPECT_EQ(RankOutputDir("out", 3, 10), "out/rank.3");
  EXPECT_EQ(RankOutputDir("out", 3, 11), "out/rank.03");
  EXPECT_EQ(RankOutputDir("out", 10, 11), "out/rank.10");
  EXPECT_EQ(RankOutputDir("/o", 7, 101), "/o/rank.007");
}

TEST(OutputFiles, MakesTheFoldersWithTheirParents) {
  char tmpl[] = "/tmp/hora-output-files-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string base = tmpl;
  ASSERT_TRUE(MakeOutputDirs(base + "/a/b", 11).ok());
  struct stat st;
  EXPECT_EQ(stat((base + "/a/b/rank.00").c_str(), &st), 0);
  EXPECT_EQ(stat((base + "/a/b/rank.10").c_str(), &st), 0);
  EXPECT_TRUE(MakeOutputDirs(base + "/a/b", 11).ok());  // again: they exist
  std::string error;
  const int fd = OpenOutputFile(base + "/a/file", &error);
  ASSERT_GE(fd, 0) << error;
  close(fd);
  Status st2 = MakeOutputDirs(base + "/a/file/x", 1);
  ASSERT_FALSE(st2.ok());
  EXPECT_EQ(st2.message(),
            "--output-filename: '" + base + "/a/file' exists and is not a directory");
  for (int r = 0; r <= 10; ++r) rmdir(RankOutputDir(base + "/a/b", r, 11).c_str());
  rmdir((base + "/a/b").c_str());
  unlink((base + "/a/file").c_str());
  rmdir((base + "/a").c_str());
  rmdir(base.c_str());
}

}  // namespace
}  // namespace hora::horarun
