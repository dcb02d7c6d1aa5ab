// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "launch/launcher_identity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "common/process_alive.h"

namespace hora {
namespace {

TEST(LauncherIdentity, OnlyAProcessThisOneCanSeeIsWatched) {
  const std::string me = LauncherIdentity();
  ASSERT_EQ(LocalLauncherPid(me), std::optional<int>(getpid())) << me;
  const std::string ns = std::to_string(PidNamespaceId());
  // Another host (boot), another pid namespace, or not an identity: none.
  EXPECT_EQ(LocalLauncherPid(std::to_string(getpid()) + ":" + ns + ":another-boot"), std::nullopt);
  EXPECT_EQ(LocalLauncherPid(std::to_string(getpid()) + ":1:" + BootId()), std::nullopt);
  for (const char* bad : {"", "12", "12:3", "x:1:2", "-4:1:2", "1:" /*pid 1*/}) {
    EXPECT_EQ(LocalLauncherPid(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(LocalLauncherPid("1:" + ns + ":" + BootId()), std::nullopt);  // (init: never)
}

}  // namespace
}  // namespace hora
