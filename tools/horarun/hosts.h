// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Where horarun places ranks: a host list ("-H a:4,b:4" or a hostfile with
// lines "a slots=4" / "a:4" / "a") and the assignment of N ranks to slots,
// filling hosts in order. Every error names the offending text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hora/status.h"

namespace hora::horarun {

struct HostSlots {
  std::string host;
  int slots = 1;
};

// "a:4,b:4", "localhost", "node1:2,node2", "[fe80::1%eth0]:2". IPv6
// addresses go in brackets (the brackets are not part of HostSlots::host).
// Hosts may not repeat.
Result<std::vector<HostSlots>> ParseHostList(std::string_view text);

// Hostfile contents: one host per line, "host", "host:N" or "host slots=N"
// (IPv6: "[addr]", "[addr]:N", "addr slots=N" or "[addr] slots=N");
// '#' starts a comment; blank lines are ignored.
Result<std::vector<HostSlots>> ParseHostfile(std::string_view contents, const std::string& path);

struct Placement {
  int rank;
  std::string host;
  int local_rank;
  int local_size;
  int cross_rank;  // index of the host among hosts that received ranks
  int cross_size;
};

// Places `np` ranks on `hosts` in order (host 0's slots first). Fails when
// the hosts have fewer slots than np, naming both numbers.
Result<std::vector<Placement>> PlaceRanks(int np, const std::vector<HostSlots>& hosts);

// True for names that mean this machine (localhost, 127.x, ::1, this host's
// name, an address of one of its interfaces: a hostfile that lists the
// launching host by its address runs those ranks here, not over ssh).
bool IsLocalHost(const std::string& host);
// True for a numeric address of one of this machine's interfaces.
bool IsLocalAddress(const std::string& host);

}  // namespace hora::horarun
