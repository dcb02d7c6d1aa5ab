// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// HORA_TCP_CONGESTION's checks against this host's kernel, and the setting
// of a connection read back.
#include "net/congestion.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "net/socket.h"
#include "support/net_test_util.h"

namespace hora::net {
namespace {

using testing::Contains;

// The names this host lets this process use: those available that pass
// the check (without CAP_NET_ADMIN, only the allowed ones do).
std::vector<std::string> Usable() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_available_congestion_control");
  std::vector<std::string> names;
  for (std::string name; in >> name;) {
    if (CheckCongestionControl(name).ok()) names.push_back(name);
  }
  return names;
}

TEST(CongestionControl, RenoIsAccepted) {
  // (Reno is built into every kernel and allowed to every user.)
  Status st = CheckCongestionControl("reno");
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST(CongestionControl, AnUnknownNameIsRefusedNamingWhatTheHostOffers) {
  Status st = CheckCongestionControl("nosuch");
  ASSERT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "HORA_TCP_CONGESTION='nosuch'")) << st.message();
  EXPECT_TRUE(Contains(st.message(), "this host's kernel has no congestion control of that name"))
      << st.message();
  EXPECT_TRUE(Contains(st.message(), "this host allows: ")) << st.message();
  EXPECT_TRUE(Contains(st.message(), "reno")) << st.message();
}

TEST(CongestionControl, NamesTooLongOrEmptyAreRefused) {
  for (const std::string& name :
       {std::string(), std::string(16, 'c'), "cubic" + std::string(11, 'x')}) {
    Status st = CheckCongestionControl(name);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << name;
    EXPECT_TRUE(Contains(st.message(), "1 to 15 characters")) << st.message();
  }
}

TEST(CongestionControl, AConnectionTakesTheNameAndReadsItBack) {
  auto [client, server] = testing::TcpPair();
  ASSERT_EQ(CongestionControlOf(client.get()), "reno");  // (within the host: socket.h)
  int changed = 0;
  for (const std::string& name : Usable()) {
    if (name == "reno") continue;
    Status st = SetCongestionControl(client.get(), name);
    ASSERT_TRUE(st.ok()) << name << ": " << st.ToString();
    EXPECT_EQ(CongestionControlOf(client.get()), name);
    EXPECT_EQ(CongestionControlOf(server.get()), "reno");  // (each end its own)
    ++changed;
  }
  if (changed == 0) GTEST_SKIP() << "this process may use reno alone: nothing to change to";
  ASSERT_TRUE(SetCongestionControl(client.get(), "reno").ok());
  EXPECT_EQ(CongestionControlOf(client.get()), "reno");
  Status st = SetCongestionControl(client.get(), "nosuch");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_EQ(CongestionControlOf(client.get()), "reno");  // (unchanged)
}

TEST(CongestionControl, AStreamWithinTheHostIsSeenAsSuch) {
  auto [client, server] = testing::TcpPair();
  EXPECT_TRUE(StreamWithinHost(client.get()));
  Fd unconnected(socket(AF_INET, SOCK_STREAM, 0));
  EXPECT_FALSE(StreamWithinHost(unconnected.get()));  // (no peer to read)
}

}  // namespace
}  // namespace hora::net
