// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "common/fork_witness.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace hora {
namespace {

TEST(ForkWitness, AChildIsToldApartFromItsParent) {
  ForkWitness witness;
  EXPECT_FALSE(witness.InChild());
  EXPECT_EQ(witness.owner(), getpid());
  const pid_t child = fork();
  if (child == 0) _exit(witness.InChild() ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child did not see itself as one";
  EXPECT_FALSE(witness.InChild());  // (the parent's mark is untouched)
}

}  // namespace
}  // namespace hora
