// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "net/auth.h"

#include <gtest/gtest.h>

#include "support/net_test_util.h"

#include <random>
#include <thread>

#include "net/socket.h"

namespace hora::net {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using testing::Contains;
using testing::TcpPair;

struct Outcome {
  Status client;
  Status server;
};

// Runs both sides; the server closes its socket when it fails, as callers do.
Outcome Handshake(std::string_view client_secret, std::string_view server_secret) {
  auto [client, server] = TcpPair();
  Outcome out;
  std::thread server_thread([&, fd = std::move(server)]() mutable {
    out.server = AuthenticateAsServer(fd.get(), server_secret, Clock::now() + seconds(10));
    if (!out.server.ok()) fd.Reset();
  });
  out.client = AuthenticateAsClient(client.get(), client_secret, Clock::now() + seconds(10));
  server_thread.join();
  return out;
}

TEST(Auth, RightSecretPassesBothWays) {
  Outcome o = Handshake("job-secret-123", "job-secret-123");
  EXPECT_TRUE(o.client.ok()) << o.client.ToString();
  EXPECT_TRUE(o.server.ok()) << o.server.ToString();
}

TEST(Auth, WrongSecretIsRefusedOnBothSides) {
  Outcome o = Handshake("guess", "job-secret-123");
  ASSERT_FALSE(o.server.ok());
  EXPECT_EQ(o.server.message(), "authentication failed");  // reveals nothing more
  ASSERT_FALSE(o.client.ok());
  EXPECT_TRUE(Contains(o.client.message(), "authentication failed")) << o.client.message();
}

TEST(Auth, EmptySecretIsRejected) {
  auto [client, server] = TcpPair();
  EXPECT_EQ(AuthenticateAsClient(client.get(), "", Clock::now() + seconds(1)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(AuthenticateAsServer(server.get(), "", Clock::now() + seconds(1)).code(),
            StatusCode::kInvalidArgument);
}

// A fake server that knows the protocol but not the secret: the client must
// notice that the proof is wrong.
TEST(Auth, ClientRejectsAServerWithoutTheSecret) {
  auto [client, server] = TcpPair();
  std::thread fake([fd = server.get()] {
    Result<ServerHandshake> hs = ServerHandshake::Create("other-secret");
    ASSERT_TRUE(hs.ok());
    ASSERT_TRUE(
        SendAll(fd, hs->hello().data(), hs->hello().size(), Clock::now() + seconds(5)).ok());
    uint8_t response[kAuthResponseBytes];
    ASSERT_TRUE(RecvAll(fd, response, sizeof response, Clock::now() + seconds(5)).ok());
    uint8_t proof[kAuthProofBytes] = {1, 2, 3};
    ASSERT_TRUE(SendAll(fd, proof, sizeof proof, Clock::now() + seconds(5)).ok());
  });
  Status st = AuthenticateAsClient(client.get(), "job-secret", Clock::now() + seconds(10));
  fake.join();
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Contains(st.message(), "does not know the job secret")) << st.message();
}

TEST(Auth, ClientRejectsBadMagicAndVersion) {
  for (int variant = 0; variant < 2; ++variant) {
    auto [client, server] = TcpPair();
    Result<ServerHandshake> hs = ServerHandshake::Create("s");
    ASSERT_TRUE(hs.ok());
    std::vector<uint8_t> hello = hs->hello();
    if (variant == 0) hello[0] = 'X';
    if (variant == 1) hello[5] = 9;  // version 9
    ASSERT_TRUE(SendAll(server.get(), hello.data(), hello.size(), Clock::now() + seconds(5)).ok());
    Status st = AuthenticateAsClient(client.get(), "s", Clock::now() + seconds(10));
    ASSERT_FALSE(st.ok());
    EXPECT_TRUE(Contains(st.message(), variant == 0 ? "bad magic" : "version 9")) << st.message();
  }
}

TEST(Auth, ServerRejectsGarbageShortAndSilentClients) {
  std::mt19937 rng(7);
  for (int variant = 0; variant < 3; ++variant) {
    auto [client, server] = TcpPair();
    std::vector<uint8_t> junk(variant == 0 ? kAuthResponseBytes : 10);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    if (variant < 2) {
      ASSERT_TRUE(SendAll(client.get(), junk.data(), junk.size(), Clock::now() + seconds(5)).ok());
    }
    if (variant == 1) client.Reset();  // short, then gone
    const TimePoint start = Clock::now();
    Status st = AuthenticateAsServer(server.get(), "s", start + milliseconds(200));
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << variant;
    EXPECT_EQ(st.message(), "authentication failed");
    EXPECT_LT(Clock::now() - start, seconds(5));  // the silent client did not pin it
  }
}

TEST(Auth, ServerHandshakeChecksTheResponseSize) {
  Result<ServerHandshake> hs = ServerHandshake::Create("s");
  ASSERT_TRUE(hs.ok());
  EXPECT_EQ(hs->hello().size(), kAuthHelloBytes);
  std::vector<uint8_t> response(kAuthResponseBytes + 1);
  EXPECT_FALSE(hs->Finish(response.data(), response.size()).ok());
  EXPECT_FALSE(hs->Finish(response.data(), kAuthResponseBytes).ok());
  EXPECT_FALSE(hs->Finish(response.data(), 0).ok());
  // Two handshakes draw different nonces.
  Result<ServerHandshake> other = ServerHandshake::Create("s");
  EXPECT_NE(hs->hello(), other->hello());
}

}  // namespace
}  // namespace hora::net
