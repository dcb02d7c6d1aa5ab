// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// hora_tests' main: Google Test's, with a usage line first for --help, as
// every binary of the build answers it (tests/help_test.sh).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::printf(
          "usage: hora_tests [--gtest_filter=PATTERN] [--gtest_list_tests] [Google Test "
          "flags]\n"
          "Hora's unit tests (ranks as threads); Google Test's flags follow.\n\n");
      std::fflush(stdout);
      argv[i] = const_cast<char*>("--help");  // Google Test's own spelling
    }
  }
  ::testing::InitGoogleTest(&argc, argv);  // prints its flags and returns for --help
  return RUN_ALL_TESTS();
}
