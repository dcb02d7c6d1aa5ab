// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The congestion control of Hora's connections between hosts
// (HORA_TCP_CONGESTION): checked once against this host's kernel, then set
// on each connection and read back. Connections within a host get Reno
// whatever the setting (socket.h, WithinHost).
#pragma once

#include <string>

#include "hora/status.h"

namespace hora::net {

// Whether this host's kernel lets a connection use `name` ("cubic", "reno",
// "bbr", ...): tried on a fresh socket. Fails with InvalidArgument naming the
// setting, the value, the kernel's reason and what the host offers
// (net.ipv4.tcp_allowed_congestion_control, and
// net.ipv4.tcp_available_congestion_control where it offers more).
Status CheckCongestionControl(const std::string& name);

// Gives the connected stream `fd` the congestion control `name` and reads it
// back; fails (InvalidArgument, as CheckCongestionControl) where the kernel
// refuses it or the name read back differs.
Status SetCongestionControl(int fd, const std::string& name);

// The congestion control `fd` uses ("?" where it cannot be read).
std::string CongestionControlOf(int fd);

}  // namespace hora::net
