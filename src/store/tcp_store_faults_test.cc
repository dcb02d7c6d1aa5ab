// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The TCP store under faults: wrong secrets, silent and garbage-sending peers,
// malformed messages, an unreachable or vanishing server. Each must end in a
// clear error on the side that caused it, and the server must keep serving.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "net/auth.h"
#include "store/tcp_store.h"

namespace hora {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::string_view kSecret = "fault-test-secret";

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Polls `done` for up to 5 s (the server acts on its own thread).
template <typename F>
bool Eventually(F done) {
  const TimePoint until = Clock::now() + seconds(5);
  while (!done()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

class TcpStoreFaults : public ::testing::Test {
 protected:
  void StartServer(TcpStoreServerOptions options = {}) {
    auto server = TcpStoreServer::Start("127.0.0.1", 0, kSecret, logger_, options);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }
  void SetUp() override { StartServer(); }
  net::HostPort address() const { return {"127.0.0.1", server_->port()}; }

  // A raw socket to the server, authenticated or not.
  net::Fd RawConnection(bool authenticate) {
    auto fd = net::Connect(address(), seconds(10));
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    if (fd.ok() && authenticate) {
      Status st = net::AuthenticateAsClient(fd->get(), kSecret, Clock::now() + seconds(10));
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
    return fd.ok() ? std::move(fd).value() : net::Fd();
  }

  // True when the server closes `fd` within 5 s (after any bytes it sends).
  static bool ClosedByServer(const net::Fd& fd) {
    uint8_t byte;
    for (;;) {
      Status st = net::RecvAll(fd.get(), &byte, 1, Clock::now() + seconds(5));
      if (!st.ok()) return st.code() == StatusCode::kUnavailable;
    }
  }

  // The client still works: the server survived what the test did.
  void ExpectServing() {
    auto c = TcpStoreClient::Connect(address(), kSecret, seconds(10));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_TRUE((*c)->Set("alive", {1}).ok());
    EXPECT_EQ(*(*c)->Get("alive", seconds(1)), Bytes{1});
  }

  Logger logger_{LogLevel::kWarning, 0};
  std::unique_ptr<TcpStoreServer> server_;
};

TEST_F(TcpStoreFaults, WrongSecretIsRefusedAndLogged) {
  testing::internal::CaptureStderr();
  auto c = TcpStoreClient::Connect(address(), "not-the-secret", seconds(10));
  const bool counted = Eventually([&] { return server_->refused_connections() == 1; });
  const std::string log = testing::internal::GetCapturedStderr();
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(Contains(c.status().message(), "authentication failed")) << c.status().message();
  EXPECT_TRUE(Contains(c.status().message(), address().ToString())) << c.status().message();
  EXPECT_TRUE(counted);
  EXPECT_TRUE(Contains(log, "refused connection from 127.0.0.1:")) << log;
  EXPECT_TRUE(Contains(log, "authentication failed")) << log;
  EXPECT_EQ(server_->authenticated_connections(), 0u);
  ExpectServing();
}

TEST_F(TcpStoreFaults, SilentClientIsDroppedAfterTheHandshakeTimeout) {
  StartServer({.handshake_timeout = milliseconds(200)});
  net::Fd silent = RawConnection(false);
  const TimePoint start = Clock::now();
  EXPECT_TRUE(ClosedByServer(silent));
  EXPECT_LT(Clock::now() - start, seconds(5));
  EXPECT_TRUE(Eventually([&] { return server_->refused_connections() == 1; }));
  ExpectServing();
}

TEST_F(TcpStoreFaults, GarbageWithoutHandshakeIsRefused) {
  std::mt19937 rng(11);
  Bytes junk(net::kAuthResponseBytes);
  for (auto& b : junk) b = static_cast<uint8_t>(rng());
  net::Fd a = RawConnection(false);
  ASSERT_TRUE(net::SendAll(a.get(), junk.data(), junk.size(), Clock::now() + seconds(5)).ok());
  EXPECT_TRUE(ClosedByServer(a));
  // A few bytes, then gone.
  net::Fd b = RawConnection(false);
  ASSERT_TRUE(net::SendAll(b.get(), "GET / HTTP/1.0\r\n", 16, Clock::now() + seconds(5)).ok());
  b.Reset();
  EXPECT_TRUE(Eventually([&] { return server_->refused_connections() == 2; }));
  EXPECT_EQ(server_->authenticated_connections(), 0u);
  ExpectServing();
}

// A flood of refused connections cannot flood the log: five lines per
// 10 s, then one with the count.
TEST_F(TcpStoreFaults, RefusalsAreLoggedAFewAtATime) {
  StartServer({.handshake_timeout = milliseconds(200)});
  testing::internal::CaptureStderr();
  for (int i = 0; i < 20; ++i) {
    net::Fd silent = RawConnection(false);
    ASSERT_TRUE(silent.valid());
    Bytes junk(net::kAuthResponseBytes, 0x47);
    ASSERT_TRUE(
        net::SendAll(silent.get(), junk.data(), junk.size(), Clock::now() + seconds(5)).ok());
    EXPECT_TRUE(ClosedByServer(silent));
  }
  EXPECT_TRUE(Eventually([&] { return server_->refused_connections() == 20; }));
  server_.reset();  // (it says the count it held back as it stops)
  const std::string log = testing::internal::GetCapturedStderr();
  size_t lines = 0;
  for (size_t at = 0; (at = log.find("refused connection from", at)) != std::string::npos; ++at) {
    ++lines;
  }
  EXPECT_EQ(lines, 5u) << log;
  EXPECT_TRUE(Contains(log, "store server: ... and 15 more like it in the last")) << log;
}

TEST_F(TcpStoreFaults, MalformedMessagesCloseOnlyThatConnection) {
  auto good = TcpStoreClient::Connect(address(), kSecret, seconds(10));
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  std::mt19937 rng(5);
  StoreRequest wait{StoreOp::kWait, {"a"}, {}, 0, 10};
  Bytes bad_count = *EncodeStoreRequest(wait);
  bad_count[kStoreHeaderBytes + 4] = 0xff;  // WAIT of 255 keys in 17 bytes
  Bytes huge_length = *EncodeStoreRequest(wait);
  huge_length[11] = 0xff;  // body_length > 4 GiB - 1 MiB
  Bytes random(64);
  for (auto& b : random) b = static_cast<uint8_t>(rng());
  const Bytes response_as_request = EncodeStoreResponse({});
  const Bytes cases[] = {random, huge_length, bad_count, response_as_request};
  for (size_t i = 0; i < std::size(cases); ++i) {
    net::Fd raw = RawConnection(true);
    ASSERT_TRUE(
        net::SendAll(raw.get(), cases[i].data(), cases[i].size(), Clock::now() + seconds(5)).ok());
    EXPECT_TRUE(ClosedByServer(raw)) << "case " << i;
    EXPECT_TRUE(Eventually([&] { return server_->malformed_connections() == i + 1; }));
    // The other client was not disturbed.
    const std::string key = "ok/" + std::to_string(i);
    ASSERT_TRUE((*good)->Set(key, {1}).ok());
    EXPECT_TRUE((*good)->Wait({key}, seconds(1)).ok());
  }
  ExpectServing();
}

// Reads one response from a raw connection.
Result<StoreResponse> ReadResponse(int fd) {
  uint8_t header[kStoreHeaderBytes];
  HORA_RETURN_IF_ERROR(net::RecvAll(fd, header, sizeof header, Clock::now() + seconds(10)));
  HORA_ASSIGN_OR_RETURN(StoreHeader h, DecodeStoreHeader(header, sizeof header));
  Bytes body(h.body_length);
  HORA_RETURN_IF_ERROR(net::RecvAll(fd, body.data(), body.size(), Clock::now() + seconds(10)));
  return DecodeStoreResponse(h, body.data(), body.size());
}

TEST_F(TcpStoreFaults, PipelinedRequestsAreAnsweredInOrder) {
  net::Fd raw = RawConnection(true);
  // GET parks; the SET behind it on the same connection waits its turn, so
  // the GET times out and the SET is answered second.
  Bytes both = *EncodeStoreRequest({StoreOp::kGet, {"p"}, {}, 0, 200});
  Bytes set = *EncodeStoreRequest({StoreOp::kSet, {"p"}, {7}, 0, 0});
  both.insert(both.end(), set.begin(), set.end());
  ASSERT_TRUE(net::SendAll(raw.get(), both.data(), both.size(), Clock::now() + seconds(5)).ok());
  auto first = ReadResponse(raw.get());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->code, StatusCode::kTimeout);
  EXPECT_TRUE(Contains(first->message, "'p'")) << first->message;
  auto second = ReadResponse(raw.get());
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->code, StatusCode::kOk);
  ExpectServing();
}

TEST_F(TcpStoreFaults, ShutdownWhileAClientWaitsGivesAnError) {
  auto c = TcpStoreClient::Connect(address(), kSecret, seconds(10));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Status waited;
  std::thread waiter([&] { waited = (*c)->Get("never", seconds(60)).status(); });
  std::this_thread::sleep_for(milliseconds(100));
  const TimePoint start = Clock::now();
  server_.reset();
  waiter.join();
  EXPECT_LT(Clock::now() - start, seconds(5));
  ASSERT_FALSE(waited.ok());
  EXPECT_TRUE(Contains(waited.message(), "127.0.0.1:")) << waited.message();
  // Later calls fail at once rather than hang.
  Status later = (*c)->Set("x", {});
  EXPECT_FALSE(later.ok());
}

TEST(TcpStoreClientErrors, UnreachableServerFailsAfterTheTimeoutNamingIt) {
  uint16_t port = 0;
  {
    auto listener = net::Listen("127.0.0.1", 0, 1);
    ASSERT_TRUE(listener.ok());
    port = *net::LocalPort(*listener);
  }
  const TimePoint start = Clock::now();
  auto c = TcpStoreClient::Connect({"127.0.0.1", port}, kSecret, milliseconds(300));
  const Duration took = Clock::now() - start;
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Contains(c.status().message(), "127.0.0.1:" + std::to_string(port)))
      << c.status().message();
  EXPECT_GE(took, milliseconds(300));
  EXPECT_LT(took, seconds(5));
}

TEST(TcpStoreClientErrors, EmptySecretIsRejected) {
  EXPECT_EQ(TcpStoreServer::Start("127.0.0.1", 0, "", std::nullopt).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TcpStoreClient::Connect({"127.0.0.1", 1}, "", seconds(1)).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hora
