// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "net_util.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "net/socket.h"

namespace hora::bench {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

double TimeoutSeconds() {
  const double t = std::atof(Env("HORA_TIMEOUT_S").c_str());
  return t > 0 ? t : 30.0;
}

Result<std::string> LocalAddressToward(const std::string& host) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  if (getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || !res)
    return UnavailableError("cannot resolve '" + host + "'");
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  const bool ok = fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  freeaddrinfo(res);
  if (fd >= 0) close(fd);
  if (!ok) return UnavailableError("no route toward '" + host + "'");
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text));
  return std::string(text);
}

Result<std::string> ReachableAddress(const Session& session) {
  if (session.local_size() == session.size()) return std::string("127.0.0.1");
  const std::string addr = Env("HORA_STORE_ADDR");
  if (addr.empty())
    return InvalidArgument("ranks on several hosts but no HORA_STORE_ADDR to find a route by");
  HORA_ASSIGN_OR_RETURN(net::HostPort hp, net::ParseHostPort(addr));
  return LocalAddressToward(hp.host);
}

Result<std::string> BroadcastText(Session& session, const std::string& text, int root) {
  char buf[256] = {};
  if (session.rank() == root) {
    if (text.size() >= sizeof(buf)) return InternalError("BroadcastText: text too long");
    std::memcpy(buf, text.data(), text.size());
  }
  HORA_RETURN_IF_ERROR(
      session.Broadcast(TensorView::Flat(buf, DataType::kUInt8, sizeof(buf)), root));
  buf[sizeof(buf) - 1] = '\0';
  return std::string(buf);
}

}  // namespace hora::bench
