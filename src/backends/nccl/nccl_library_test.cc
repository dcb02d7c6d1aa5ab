// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The NCCL library's loading (no GPU needed): a library that is not there
// is an error naming it; the toolkit's libnccl.so.2, where this machine has
// one, loads with every function Hora calls and says its version. The
// host device's NCCL (host_nccl.h) is what the engine's tests run.
#include <gtest/gtest.h>
#include <unistd.h>

#include "backends/nccl/nccl.h"

namespace hora {
namespace {

// (A build without nccl.h says that instead, whatever the path.)
TEST(NcclLibrary, AMissingLibraryIsAnErrorNamingIt) {
  auto lib = OpenNcclLibrary("/nonexistent/libnccl.so.2");
  ASSERT_FALSE(lib.ok());
  const std::string why = lib.status().code() == StatusCode::kUnimplemented
                              ? "this build of Hora has no NCCL support"
                              : "/nonexistent/libnccl.so.2";
  EXPECT_NE(lib.status().message().find(why), std::string::npos) << lib.status().ToString();
}

TEST(NcclLibrary, TheToolkitsLibraryLoadsWithEveryFunction) {
  const char* path = "/usr/local/cuda/lib64/libnccl.so.2";
  if (access(path, R_OK) != 0) path = "/usr/local/cuda/lib/libnccl.so.2";
  if (access(path, R_OK) != 0) GTEST_SKIP() << "no libnccl.so.2 in /usr/local/cuda here";
  auto lib = OpenNcclLibrary(path);
  if (!lib.ok() && lib.status().code() == StatusCode::kUnimplemented) {
    GTEST_SKIP() << "built without nccl.h: " << lib.status().ToString();
  }
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  EXPECT_EQ((*lib)->version().rfind("NCCL 2.", 0), 0u) << (*lib)->version();
}

TEST(NcclLibrary, WhatNcclTakes) {
  EXPECT_TRUE(NcclTakes(DataType::kFloat32, ReduceOp::kSum));
  EXPECT_TRUE(NcclTakes(DataType::kBFloat16, ReduceOp::kProduct));
  EXPECT_TRUE(NcclTakes(DataType::kInt64, ReduceOp::kMax));
  EXPECT_FALSE(NcclTakes(DataType::kFloat32, ReduceOp::kMin));  // (NaN and -0 rules)
  EXPECT_FALSE(NcclTakes(DataType::kInt16, ReduceOp::kSum));    // (no such NCCL type)
  EXPECT_FALSE(NcclTakes(DataType::kBool, ReduceOp::kMax));
  EXPECT_FALSE(NcclTakes(DataType::kFloat32, ReduceOp::kAverage));  // (a sum, finalized)
  EXPECT_FALSE(NcclTakes(DataType::kFloat32, ReduceOp::kAdasum));
}

}  // namespace
}  // namespace hora
