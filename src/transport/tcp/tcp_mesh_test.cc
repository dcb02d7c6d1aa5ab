// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// ConnectTcpMesh ends its accepts and connects once its store says the
// world it connects was abandoned (Store::Abandoned: an elastic world whose
// member ended while it formed), not at the start timeout.
#include "transport/tcp/tcp_mesh.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "net/congestion.h"
#include "net/socket.h"
#include "support/forwarding_store.h"

namespace hora {
namespace {

// A memory store abandoned once `abandon` is set.
class Abandonable final : public testing::ForwardingStore {
 public:
  Status Abandoned() override {
    return abandon ? UnavailableError("worker w/1 of world 2 ended") : Status::Ok();
  }
  std::atomic<bool> abandon{false};
};

TcpMeshOptions Options(int rank) {
  TcpMeshOptions o;
  o.rank = rank;
  o.size = 2;
  o.key_prefix = "mesh";
  o.secret = "s3cret";
  o.iface = "127.0.0.1";
  o.timeout = std::chrono::seconds(30);
  return o;
}

TEST(TcpMesh, AcceptingEndsWhenTheWorldIsAbandoned) {
  Abandonable store;  // (rank 1 never comes)
  store.abandon = true;
  const TimePoint start = Clock::now();
  auto fds = ConnectTcpMesh(store, Options(0));
  EXPECT_EQ(fds.status().code(), StatusCode::kUnavailable) << fds.status().ToString();
  EXPECT_NE(fds.status().message().find("worker w/1 of world 2 ended"), std::string::npos)
      << fds.status().message();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST(TcpMesh, ConnectingEndsWhenTheWorldIsAbandoned) {
  Abandonable store;
  // Rank 0 gave an address and ended: its port refuses every connection.
  std::string addr;
  {
    auto listener = net::Listen("127.0.0.1", 0, 1);
    ASSERT_TRUE(listener.ok()) << listener.status().ToString();
    auto port = net::LocalPort(*listener);
    ASSERT_TRUE(port.ok());
    addr = "127.0.0.1:" + std::to_string(*port);
  }  // (closed here)
  ASSERT_TRUE(store.Set("mesh/addr/0", Bytes(addr.begin(), addr.end())).ok());
  store.abandon = true;
  const TimePoint start = Clock::now();
  auto fds = ConnectTcpMesh(store, Options(1));
  EXPECT_EQ(fds.status().code(), StatusCode::kUnavailable) << fds.status().ToString();
  EXPECT_NE(fds.status().message().find("worker w/1 of world 2 ended"), std::string::npos)
      << fds.status().message();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST(TcpMesh, TheCongestionSettingLeavesConnectionsWithinTheHostOnReno) {
  // (Connections to other hosts take it: mp_netns_hosts2x2_engine_congestion.)
  Abandonable store;
  TcpMeshOptions o0 = Options(0), o1 = Options(1);
  // (Any name this process may use but reno; Linux kernels build cubic in
  // and allow it.)
  if (!net::CheckCongestionControl("cubic").ok()) GTEST_SKIP() << "cubic is not usable here";
  o0.congestion = o1.congestion = "cubic";
  Result<std::vector<net::Fd>> fds1 = UnavailableError("not run");
  std::thread rank1([&] { fds1 = ConnectTcpMesh(store, o1); });
  auto fds0 = ConnectTcpMesh(store, o0);
  rank1.join();
  ASSERT_TRUE(fds0.ok()) << fds0.status().ToString();
  ASSERT_TRUE(fds1.ok()) << fds1.status().ToString();
  EXPECT_EQ(net::CongestionControlOf((*fds0)[1].get()), "reno");
  EXPECT_EQ(net::CongestionControlOf((*fds1)[0].get()), "reno");
}

TEST(TcpMesh, AnUnknownCongestionControlFailsBeforeConnecting) {
  Abandonable store;  // (rank 1 never comes: the check comes first)
  TcpMeshOptions o = Options(0);
  o.congestion = "nosuch";
  const TimePoint start = Clock::now();
  auto fds = ConnectTcpMesh(store, o);
  EXPECT_EQ(fds.status().code(), StatusCode::kInvalidArgument) << fds.status().ToString();
  EXPECT_NE(fds.status().message().find("HORA_TCP_CONGESTION='nosuch'"), std::string::npos)
      << fds.status().message();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace hora
