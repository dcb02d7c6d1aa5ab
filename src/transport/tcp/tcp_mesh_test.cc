// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// ConnectTcpMesh ends its accepts and connects once its store says the
// world it connects was abandoned (Store::Abandoned: an elastic world whose
// member ended while it formed), not at the start timeout.
#include "transport/tcp/tcp_mesh.h"

#include <gtest/gtest.h>

#include <atomic>

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

}  // namespace
}  // namespace hora
