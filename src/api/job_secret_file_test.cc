// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "api/job_secret_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace hora {
namespace {

class JobSecretFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/hora-secret-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    home_ = dir;
  }
  void TearDown() override { EXPECT_EQ(std::system(("rm -rf " + home_).c_str()), 0); }
  std::string Path(const std::string& key) { return *JobSecretPath({{"HOME", home_}}, key); }
  std::string home_;
};

int Mode(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
}

TEST_F(JobSecretFileTest, PathIsInTheHomeWithTheKeyMadeSafe) {
  EXPECT_EQ(Path("4242.7-27495"), home_ + "/.hora/jobs/4242.7-27495");
  EXPECT_EQ(Path("torchrun-none-10.0.0.1:29501"),
            home_ + "/.hora/jobs/torchrun-none-10.0.0.1_29501");
  EXPECT_EQ(Path("../../etc/x"), home_ + "/.hora/jobs/_.._.._etc_x");
  EXPECT_EQ(*JobSecretPath({{"HOME", home_ + "/"}}, "k"), home_ + "/.hora/jobs/k");
  auto relative = JobSecretPath({{"HOME", "relative/dir"}}, "k");
  ASSERT_FALSE(relative.ok());
  EXPECT_NE(relative.status().message().find("HORA_SECRET"), std::string::npos);
}

TEST_F(JobSecretFileTest, RankZeroWritesAPrivateFreshSecretTheOthersRead) {
  const std::string path = Path("1.0-20000");
  auto file = JobSecretFile::Create(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->secret().size(), 64u);
  EXPECT_EQ(Mode(home_ + "/.hora"), 0700);
  EXPECT_EQ(Mode(home_ + "/.hora/jobs"), 0700);
  EXPECT_EQ(Mode(path), 0600);
  auto read = ReadJobSecretFile(path, Clock::now());
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, (*file)->secret());
  // A second job under the same name replaces the file with a new secret.
  auto again = JobSecretFile::Create(path);
  ASSERT_TRUE(again.ok());
  EXPECT_NE((*again)->secret(), (*file)->secret());
  EXPECT_EQ(*ReadJobSecretFile(path, Clock::now()), (*again)->secret());
  (*again)->Remove();
  EXPECT_EQ(Mode(path), -1);
  file->reset();  // the first one's removal finds nothing, harmlessly
  EXPECT_EQ(Mode(path), -1);
}

TEST_F(JobSecretFileTest, RemovedWhenDestroyed) {
  const std::string path = Path("2.0-20000");
  { ASSERT_TRUE(JobSecretFile::Create(path).ok()); }
  EXPECT_EQ(Mode(path), -1);
}

TEST_F(JobSecretFileTest, ReaderWaitsForTheFileUntilItsDeadline) {
  const std::string path = Path("3.0-20000");
  const TimePoint start = Clock::now();
  auto missing = ReadJobSecretFile(path, start + std::chrono::milliseconds(300));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kTimeout);
  EXPECT_NE(missing.status().message().find(path + " did not appear"), std::string::npos);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(300));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));

  std::unique_ptr<JobSecretFile> file;
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    file = std::move(JobSecretFile::Create(path)).value();
  });
  auto read = ReadJobSecretFile(path, Clock::now() + std::chrono::seconds(10));
  writer.join();
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, file->secret());
}

TEST_F(JobSecretFileTest, RefusesAFileOthersCanRead) {
  const std::string path = Path("4.0-20000");
  auto file = JobSecretFile::Create(path);
  ASSERT_TRUE(file.ok());
  chmod(path.c_str(), 0644);
  auto read = ReadJobSecretFile(path, Clock::now());
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("not a private file"), std::string::npos);
  std::ofstream(path + "x") << "no newline";
  chmod((path + "x").c_str(), 0600);
  auto partial = ReadJobSecretFile(path + "x", Clock::now());
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.status().message().find("does not hold a job secret"), std::string::npos);
}

TEST_F(JobSecretFileTest, RefusesDirectoriesOthersCanWriteTo) {
  const std::string path = Path("5.0-20000");
  ASSERT_EQ(mkdir((home_ + "/.hora").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((home_ + "/.hora/jobs").c_str(), 0700), 0);
  ASSERT_EQ(chmod((home_ + "/.hora/jobs").c_str(), 0777), 0);  // as a umask of 0 leaves it
  auto file = JobSecretFile::Create(path);
  ASSERT_FALSE(file.ok());
  EXPECT_NE(
      file.status().message().find(home_ + "/.hora/jobs can be written by others (mode 0777)"),
      std::string::npos)
      << file.status().message();
  // The readers refuse it too, once a file is there.
  ASSERT_EQ(chmod((home_ + "/.hora/jobs").c_str(), 0700), 0);
  file = JobSecretFile::Create(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_EQ(chmod((home_ + "/.hora").c_str(), 0770), 0);
  auto read = ReadJobSecretFile(path, Clock::now());
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find(home_ + "/.hora can be written by others (mode 0770)"),
            std::string::npos)
      << read.status().message();
}

TEST_F(JobSecretFileTest, RefusesASymbolicLinkForADirectory) {
  char other[] = "/tmp/hora-secret-other-XXXXXX";
  ASSERT_NE(mkdtemp(other), nullptr);
  ASSERT_EQ(symlink(other, (home_ + "/.hora").c_str()), 0);
  auto file = JobSecretFile::Create(Path("6.0-20000"));
  ASSERT_EQ(std::system((std::string("rm -rf ") + other).c_str()), 0);
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find(home_ + "/.hora is a symbolic link"), std::string::npos)
      << file.status().message();
}

TEST_F(JobSecretFileTest, AFifoUnderTheNameIsRefusedAtOnce) {
  const std::string path = Path("7.0-20000");
  ASSERT_TRUE(JobSecretFile::Create(Path("7.0-other")).ok());  // the directories
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  const TimePoint start = Clock::now();
  auto read = ReadJobSecretFile(path, start + std::chrono::seconds(5));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find(path + " is not a private file"), std::string::npos)
      << read.status().message();
}

}  // namespace
}  // namespace hora
