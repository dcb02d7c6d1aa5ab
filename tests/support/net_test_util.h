// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Helpers shared by the net/ tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "net/socket.h"

namespace hora::net::testing {

inline bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A connected TCP pair over loopback: {client, server}.
inline std::pair<Fd, Fd> TcpPair() {
  Result<Fd> listener = Listen("127.0.0.1", 0, 4);
  EXPECT_TRUE(listener.ok()) << listener.status().ToString();
  const uint16_t port = *LocalPort(*listener);
  Result<Fd> client = Connect({"127.0.0.1", port}, std::chrono::seconds(5));
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  Result<Fd> server = Accept(listener->get(), Clock::now() + std::chrono::seconds(5));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return {std::move(client).value(), std::move(server).value()};
}

}  // namespace hora::net::testing
