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

// A connected TCP pair over loopback: {client, server}; a failed step is
// a test failure and gives invalid descriptors.
inline std::pair<Fd, Fd> TcpPair() {
  Result<Fd> listener = Listen("127.0.0.1", 0, 4);
  EXPECT_TRUE(listener.ok()) << listener.status().ToString();
  if (!listener.ok()) return {};
  Result<uint16_t> port = LocalPort(*listener);
  EXPECT_TRUE(port.ok()) << port.status().ToString();
  if (!port.ok()) return {};
  Result<Fd> client = Connect({"127.0.0.1", *port}, std::chrono::seconds(5));
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  if (!client.ok()) return {};
  Result<Fd> server = Accept(listener->get(), Clock::now() + std::chrono::seconds(5));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  if (!server.ok()) return {};
  return {std::move(client).value(), std::move(server).value()};
}

}  // namespace hora::net::testing
