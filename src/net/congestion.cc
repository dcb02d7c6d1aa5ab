// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "net/congestion.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "net/socket.h"

namespace hora::net {
namespace {

// The kernel's longest name, without its terminating zero (TCP_CA_NAME_MAX - 1).
constexpr size_t kMaxName = 15;

// One line of /proc/sys/net/ipv4/<file> ("" where it cannot be read).
std::string ReadSysctl(const char* file) {
  std::ifstream in(std::string("/proc/sys/net/ipv4/") + file);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string Setting(const std::string& name) { return "HORA_TCP_CONGESTION='" + name + "'"; }

Status Refused(const std::string& name, const std::string& why) {
  std::string text = Setting(name) + ": " + why;
  const std::string allowed = ReadSysctl("tcp_allowed_congestion_control");
  const std::string available = ReadSysctl("tcp_available_congestion_control");
  if (!allowed.empty()) text += "; this host allows: " + allowed;
  if (!available.empty() && available != allowed) {
    text += " (and, to a process with CAP_NET_ADMIN: " + available + ")";
  }
  return InvalidArgument(text + "; leave it unset for the system's choice");
}

Status SetOn(int fd, const std::string& name) {
  if (name.empty() || name.size() > kMaxName) {
    return Refused(name, "not a congestion control name (1 to 15 characters)");
  }
  if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                 static_cast<socklen_t>(name.size())) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      return Refused(name,
                     "this host's kernel has no congestion control of that name (or its "
                     "module, tcp_" +
                         name + ", is not loaded)");
    }
    if (err == EPERM) {
      return Refused(name, "this process may not use it (net.ipv4.tcp_allowed_congestion_control)");
    }
    return Refused(name, std::string("the kernel refuses it: ") + std::strerror(err));
  }
  return Status::Ok();
}

}  // namespace

Status CheckCongestionControl(const std::string& name) {
  Fd probe(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!probe.valid()) probe.Reset(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!probe.valid()) {
    return UnavailableError(Setting(name) + ": no socket to try it on: " + std::strerror(errno));
  }
  return SetOn(probe.get(), name);
}

Status SetCongestionControl(int fd, const std::string& name) {
  HORA_RETURN_IF_ERROR(SetOn(fd, name));
  const std::string now = CongestionControlOf(fd);
  if (now != name) {
    return InvalidArgument(Setting(name) + ": set, but the connection reads back '" + now + "'");
  }
  return Status::Ok();
}

std::string CongestionControlOf(int fd) {
  char name[kMaxName + 1] = {};
  socklen_t len = sizeof name;
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return "?";
  return std::string(name, strnlen(name, len));
}

}  // namespace hora::net
