// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The TCP store doing its job: the Store contract over real sockets.
// Faults (wrong secrets, garbage, shutdown) are in tcp_store_faults_test.cc.
#include "store/tcp_store.h"

#include <gtest/gtest.h>

#include <thread>

namespace hora {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::string_view kSecret = "tcp-store-test-secret";

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

class TcpStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = TcpStoreServer::Start("127.0.0.1", 0, kSecret, std::nullopt);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }
  net::HostPort address() const { return {"127.0.0.1", server_->port()}; }
  std::unique_ptr<TcpStoreClient> NewClient() {
    auto client = TcpStoreClient::Connect(address(), kSecret, seconds(10));
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  std::unique_ptr<TcpStoreServer> server_;
};

TEST_F(TcpStoreTest, SetGetAddWaitDelete) {
  auto c = NewClient();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Set("a", {1, 2, 3}).ok());
  auto v = c->Get("a", milliseconds(10));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, (Bytes{1, 2, 3}));
  ASSERT_TRUE(c->Set("a", {}).ok());
  EXPECT_EQ(*c->Get("a", milliseconds(10)), Bytes{});
  EXPECT_EQ(*c->Add("n", 5), 5);
  EXPECT_EQ(*c->Add("n", -7), -2);
  EXPECT_TRUE(c->Wait({"a", "n"}, milliseconds(10)).ok());
  EXPECT_TRUE(c->Wait({}, milliseconds(10)).ok());
  EXPECT_TRUE(*c->Delete("a"));
  EXPECT_FALSE(*c->Delete("a"));
  EXPECT_EQ(server_->authenticated_connections(), 1u);
}

TEST_F(TcpStoreTest, AddOnANonCounterIsAnErrorAndTheConnectionGoesOn) {
  auto c = NewClient();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Set("text", {'h', 'i'}).ok());
  auto r = c->Add("text", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(r.status().message(), "'text'")) << r.status().message();
  EXPECT_TRUE(c->Set("after", {1}).ok());
}

TEST_F(TcpStoreTest, EightClientThreadsRendezvous) {
  constexpr int kThreads = 8;
  constexpr int kAdds = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t] {
      auto c = NewClient();
      ASSERT_NE(c, nullptr);
      for (int i = 0; i < kAdds; ++i) ASSERT_TRUE(c->Add("counter", 1).ok());
      ASSERT_TRUE(c->Set("addr/" + std::to_string(t), {static_cast<uint8_t>(t)}).ok());
      std::vector<std::string> all;
      for (int p = 0; p < kThreads; ++p) all.push_back("addr/" + std::to_string(p));
      Status st = c->Wait(all, seconds(30));
      ASSERT_TRUE(st.ok()) << st.ToString();
      for (int p = 0; p < kThreads; ++p) {
        auto v = c->Get(all[p], seconds(1));
        ASSERT_TRUE(v.ok()) << v.status().ToString();
        EXPECT_EQ(*v, Bytes{static_cast<uint8_t>(p)});
      }
    });
  }
  for (auto& t : threads) t.join();
  auto c = NewClient();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(*c->Add("counter", 0), kThreads * kAdds);
  for (int p = 0; p < kThreads; ++p) EXPECT_TRUE(*c->Delete("addr/" + std::to_string(p)));
  EXPECT_EQ(server_->authenticated_connections(), kThreads + 1u);
}

TEST_F(TcpStoreTest, OneClientIsSafeToShareAcrossThreads) {
  auto c = NewClient();
  ASSERT_NE(c, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&c, t] {
      for (int i = 0; i < 50; ++i) {
        ASSERT_TRUE(c->Add("shared", 1).ok());
        const std::string key = "t" + std::to_string(t) + "/" + std::to_string(i);
        ASSERT_TRUE(c->Set(key, {static_cast<uint8_t>(i)}).ok());
        EXPECT_EQ(*c->Get(key, seconds(1)), Bytes{static_cast<uint8_t>(i)});
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(*c->Add("shared", 0), 400);
}

TEST_F(TcpStoreTest, GetWaitsForALaterSet) {
  auto reader = NewClient();
  auto writer = NewClient();
  ASSERT_NE(reader, nullptr);
  ASSERT_NE(writer, nullptr);
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    ASSERT_TRUE(writer->Set("late", {7}).ok());
  });
  auto v = reader->Get("late", seconds(30));
  setter.join();
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, Bytes{7});
}

TEST_F(TcpStoreTest, WaitTimesOutNamingTheMissingKeys) {
  auto c = NewClient();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Set("here", {}).ok());
  const TimePoint start = Clock::now();
  Status st = c->Wait({"here", "missing"}, milliseconds(200));
  const Duration took = Clock::now() - start;
  EXPECT_EQ(st.code(), StatusCode::kTimeout) << st.ToString();
  EXPECT_TRUE(Contains(st.message(), "'missing'")) << st.message();
  EXPECT_FALSE(Contains(st.message(), "'here'")) << st.message();
  EXPECT_TRUE(Contains(st.message(), "127.0.0.1:" + std::to_string(server_->port())))
      << st.message();
  EXPECT_GE(took, milliseconds(200));
  EXPECT_LT(took, seconds(5));
  // The connection is still good after a timeout.
  auto get = c->Get("missing", milliseconds(1));
  EXPECT_EQ(get.status().code(), StatusCode::kTimeout);
  EXPECT_TRUE(c->Set("missing", {1}).ok());
  EXPECT_TRUE(c->Wait({"here", "missing"}, milliseconds(1)).ok());
}

TEST_F(TcpStoreTest, LargeValuesRoundTrip) {
  auto writer = NewClient();
  auto reader = NewClient();
  ASSERT_NE(writer, nullptr);
  ASSERT_NE(reader, nullptr);
  Bytes big(16 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i ^ (i >> 9));
  std::thread t([&] { ASSERT_TRUE(writer->Set("big", big).ok()); });
  auto v = reader->Get("big", seconds(60));
  t.join();
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(*v == big);
}

TEST(TcpStoreIpv6, LoopbackWorks) {
  auto server = TcpStoreServer::Start("::1", 0, kSecret, std::nullopt);
  if (!server.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << server.status().ToString();
  auto addr = net::ParseHostPort("[::1]:" + std::to_string((*server)->port()));
  ASSERT_TRUE(addr.ok());
  auto c = TcpStoreClient::Connect(*addr, kSecret, seconds(10));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE((*c)->Set("v6", {6}).ok());
  EXPECT_EQ(*(*c)->Get("v6", seconds(1)), Bytes{6});
}

TEST(TcpStoreTable, ParksAndReleasesInOrder) {
  StoreTable table;
  const TimePoint t0 = Clock::now();
  StoreRequest get{StoreOp::kGet, {"k"}, {}, 0, 1000};
  EXPECT_FALSE(table.Apply(1, get, t0).has_value());
  StoreRequest wait{StoreOp::kWait, {"k", "j"}, {}, 0, 500};
  EXPECT_FALSE(table.Apply(2, wait, t0).has_value());
  EXPECT_EQ(table.NextDeadline(), t0 + milliseconds(500));
  EXPECT_TRUE(table.Release(t0).empty());
  ASSERT_TRUE(table.Apply(3, {StoreOp::kSet, {"k"}, {4}, 0, 0}, t0).has_value());
  auto replies = table.Release(t0);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].client, 1u);
  EXPECT_EQ(replies[0].response.value, Bytes{4});
  replies = table.Release(t0 + milliseconds(500));
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].response.code, StatusCode::kTimeout);
  EXPECT_TRUE(Contains(replies[0].response.message, "'j'")) << replies[0].response.message;
  EXPECT_FALSE(Contains(replies[0].response.message, "'k'")) << replies[0].response.message;
  EXPECT_EQ(table.parked(), 0u);
}

}  // namespace
}  // namespace hora
