// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "net/socket.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <cstring>

#include "net/congestion.h"
#include "support/net_test_util.h"

#include <thread>
#include <vector>

namespace hora::net {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using testing::Contains;
using testing::TcpPair;

// A port that nothing listens on (bound once, then closed).
uint16_t ClosedPort() {
  Result<Fd> listener = Listen("127.0.0.1", 0, 1);
  EXPECT_TRUE(listener.ok());
  return *LocalPort(*listener);
}

TEST(SocketParseHostPort, AcceptsNamesIpv4AndBracketedIpv6) {
  auto a = ParseHostPort("node-3.cluster:29500");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->host, "node-3.cluster");
  EXPECT_EQ(a->port, 29500);
  auto b = ParseHostPort("1.2.3.4:5");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "1.2.3.4");
  EXPECT_EQ(b->port, 5);
  auto c = ParseHostPort("[::1]:65535");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, 65535);
  EXPECT_EQ(c->ToString(), "[::1]:65535");
  EXPECT_EQ(b->ToString(), "1.2.3.4:5");
}

TEST(SocketParseHostPort, RejectsBadInputNamingTheText) {
  for (const char* text : {"", "host", "host:", ":80", "host:0", "host:65536", "host:8x", "host:-1",
                           "::1:5", "[::1]", "[::1]5", "[::1", "[]:5", "h: 80"}) {
    auto r = ParseHostPort(text);
    ASSERT_FALSE(r.ok()) << "accepted '" << text << "'";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(r.status().message(), "'" + std::string(text) + "'"))
        << r.status().message();
  }
}

TEST(SocketConnect, ClosedPortFailsWithinTheTimeoutNamingHostPort) {
  const uint16_t port = ClosedPort();
  const TimePoint start = Clock::now();
  Result<Fd> fd = Connect({"127.0.0.1", port}, milliseconds(300));
  const Duration took = Clock::now() - start;
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), StatusCode::kUnavailable);
  const std::string& m = fd.status().message();
  EXPECT_TRUE(Contains(m, "127.0.0.1:" + std::to_string(port))) << m;
  EXPECT_TRUE(Contains(m, "within 0.3 s")) << m;
  EXPECT_TRUE(Contains(m, "Connection refused")) << m;
  EXPECT_GE(took, milliseconds(300));  // it kept retrying until the timeout
  EXPECT_LT(took, seconds(5));
}

TEST(SocketConnect, RetriesUntilTheServerAppears) {
  const uint16_t port = ClosedPort();
  std::thread late_server([port] {
    std::this_thread::sleep_for(milliseconds(200));
    Result<Fd> listener = Listen("127.0.0.1", port, 4);
    ASSERT_TRUE(listener.ok()) << listener.status().ToString();
    Result<Fd> conn = Accept(listener->get(), Clock::now() + seconds(10));
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    ASSERT_TRUE(SendAll(conn->get(), "hi", 2, Clock::now() + seconds(10)).ok());
  });
  Result<Fd> fd = Connect({"127.0.0.1", port}, seconds(20));
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  char buf[2];
  Status st = RecvAll(fd->get(), buf, 2, Clock::now() + seconds(10));
  late_server.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(std::string(buf, 2), "hi");
}

TEST(SocketConnect, UnresolvableNameFailsAtOnce) {
  Result<Fd> fd = Connect({"no-such-host.invalid", 80}, seconds(30));
  ASSERT_FALSE(fd.ok());
  EXPECT_TRUE(Contains(fd.status().message(), "no-such-host.invalid:80")) << fd.status().message();
}

TEST(SocketIo, RecvAllTimesOut) {
  auto [client, server] = TcpPair();
  char buf[4];
  const TimePoint start = Clock::now();
  Status st = RecvAll(client.get(), buf, sizeof buf, start + milliseconds(200));
  const Duration took = Clock::now() - start;
  EXPECT_EQ(st.code(), StatusCode::kTimeout) << st.ToString();
  EXPECT_GE(took, milliseconds(200));
  EXPECT_LT(took, seconds(5));
}

TEST(SocketIo, ClosedPeerIsAnError) {
  auto [client, server] = TcpPair();
  ASSERT_TRUE(SendAll(server.get(), "ab", 2, Clock::now() + seconds(5)).ok());
  server.Reset();
  char buf[4];
  Status st = RecvAll(client.get(), buf, sizeof buf, Clock::now() + seconds(5));
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Contains(st.message(), "connection closed by peer")) << st.message();
}

TEST(SocketIo, LargeTransferArrivesIntact) {
  auto [client, server] = TcpPair();
  std::vector<uint8_t> data(8 << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + (i >> 12));
  std::thread sender([&, fd = client.get()] {
    EXPECT_TRUE(SendAll(fd, data.data(), data.size(), Clock::now() + seconds(60)).ok());
  });
  std::vector<uint8_t> got(data.size());
  Status st = RecvAll(server.get(), got.data(), got.size(), Clock::now() + seconds(60));
  sender.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(got == data);
}

TEST(SocketListen, AcceptTimesOutAndPeerAddressIsReadable) {
  Result<Fd> listener = Listen("127.0.0.1", 0, 4);
  ASSERT_TRUE(listener.ok());
  Result<Fd> none = Accept(listener->get(), Clock::now() + milliseconds(50));
  EXPECT_EQ(none.status().code(), StatusCode::kTimeout);
  const uint16_t port = *LocalPort(*listener);
  EXPECT_NE(port, 0);
  Result<Fd> client = Connect({"127.0.0.1", port}, seconds(5));
  ASSERT_TRUE(client.ok());
  std::string peer;
  Result<Fd> server = Accept(listener->get(), Clock::now() + seconds(5), &peer);
  ASSERT_TRUE(server.ok());
  EXPECT_EQ(PeerAddress(client->get()), "127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(PeerAddress(server->get()), peer);
  EXPECT_TRUE(Contains(peer, "127.0.0.1:")) << peer;
}

TEST(SocketConnect, AConnectionWithinTheHostUsesReno) {
  // (This machine's default is BBR, which paces loopback traffic.)
  auto [client, server] = TcpPair();
  EXPECT_EQ(CongestionControlOf(client.get()), "reno");
  EXPECT_EQ(CongestionControlOf(server.get()), "reno");
}

sockaddr_storage Address(const char* text) {
  sockaddr_storage ss{};
  if (std::strchr(text, ':') != nullptr) {
    sockaddr_in6 in6{};
    in6.sin6_family = AF_INET6;
    EXPECT_EQ(inet_pton(AF_INET6, text, &in6.sin6_addr), 1) << text;
    std::memcpy(&ss, &in6, sizeof in6);
  } else {
    sockaddr_in in{};
    in.sin_family = AF_INET;
    EXPECT_EQ(inet_pton(AF_INET, text, &in.sin_addr), 1) << text;
    std::memcpy(&ss, &in, sizeof in);
  }
  return ss;
}

TEST(SocketWithinHost, LoopbackOrTheSameAddressOnly) {
  struct Case {
    const char* local;
    const char* peer;
    bool within;
  };
  for (const Case& c : std::vector<Case>{
           {"127.0.0.1", "127.0.0.1", true},
           {"10.0.0.5", "127.1.2.3", true},  // all of 127.0.0.0/8
           {"10.0.0.5", "10.0.0.5", true},   // this host's own address
           {"10.0.0.5", "10.0.0.6", false},
           {"10.0.0.5", "128.0.0.1", false},
           {"::1", "::1", true},
           {"2001:db8::1", "2001:db8::1", true},
           {"2001:db8::1", "2001:db8::2", false},
           {"::ffff:10.0.0.5", "::ffff:127.0.0.1", true},
           {"::ffff:10.0.0.5", "10.0.0.5", true},  // (v4-mapped against plain IPv4)
           {"::ffff:10.0.0.5", "::ffff:10.0.0.7", false},
       }) {
    EXPECT_EQ(WithinHost(Address(c.local), Address(c.peer)), c.within) << c.local << " " << c.peer;
  }
}

TEST(SocketListen, AnyInterfaceServesIpv4) {
  Result<Fd> listener = Listen("", 0, 4);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  Result<Fd> client = Connect({"127.0.0.1", *LocalPort(*listener)}, seconds(5));
  EXPECT_TRUE(client.ok()) << client.status().ToString();
}

TEST(SocketListen, Ipv6Loopback) {
  Result<Fd> listener = Listen("[::1]", 0, 4);
  if (!listener.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << listener.status().ToString();
  const uint16_t port = *LocalPort(*listener);
  Result<Fd> client = Connect(*ParseHostPort("[::1]:" + std::to_string(port)), seconds(5));
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ(PeerAddress(client->get()), "[::1]:" + std::to_string(port));
}

TEST(SocketListen, BusyPortIsAnErrorNamingIt) {
  Result<Fd> first = Listen("127.0.0.1", 0, 4);
  ASSERT_TRUE(first.ok());
  const uint16_t port = *LocalPort(*first);
  Result<Fd> second = Listen("127.0.0.1", port, 4);
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(Contains(second.status().message(), "127.0.0.1:" + std::to_string(port)))
      << second.status().message();
}

}  // namespace
}  // namespace hora::net
