// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "hosts.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <utility>
#include <vector>

namespace hora::horarun {
namespace {

// The hosts and slot counts of a parsed list, to compare in one expectation.
std::vector<std::pair<std::string, int>> Slots(const std::vector<HostSlots>& hosts) {
  std::vector<std::pair<std::string, int>> out;
  for (const HostSlots& h : hosts) out.emplace_back(h.host, h.slots);
  return out;
}

TEST(Hosts, ParsesHostLists) {
  auto h = ParseHostList("a:4,b:2,c");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ((*h)[0].host, "a");
  EXPECT_EQ((*h)[0].slots, 4);
  EXPECT_EQ((*h)[1].slots, 2);
  EXPECT_EQ((*h)[2].slots, 1);
}

TEST(Hosts, BadHostListsNameTheText) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"a:0", "at least 1"},
      {"a:x", "'x' is not a number"},
      {"a:4,a:2", "listed twice"},
      {"", "empty host name"},
      {"a:4,,b", "empty host name"},
      {"a b:2", "contains ' '"},
      {"a:-1", "'-1' is not a number"},
      {"-oProxy:2", "starts with '-'"},
      {"::1:2", "an IPv6 address goes in brackets"},
      {"fe80::1", "an IPv6 address goes in brackets"},
      {"[::1]:0", "at least 1"},
      {"[::g]:2", "'[::g]' is not an IPv6 address"},
      {"[10.0.0.1]:2", "'[10.0.0.1]' is not an IPv6 address"},
      {"[fe80::1%]:2", "is not an IPv6 address"},
      {"[fe80::1%x@evil]:2", "is not an IPv6 address"},
      {"[::1:2", "an IPv6 address goes in brackets"},
      {"[::1]:2,[::1]", "listed twice"},
  };
  for (const Case& c : cases) {
    auto h = ParseHostList(c.text);
    ASSERT_FALSE(h.ok()) << c.text;
    EXPECT_NE(h.status().message().find(c.expect), std::string::npos) << h.status().message();
    EXPECT_NE(h.status().message().find(std::string("-H '") + c.text + "'"), std::string::npos);
  }
}

TEST(Hosts, TakesIpv6AddressesInBrackets) {
  auto h = ParseHostList("[::1]:2,[fe80::1%eth0],[2001:db8::7]:3,b:1");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  using Want = std::vector<std::pair<std::string, int>>;
  EXPECT_EQ(Slots(*h), (Want{{"::1", 2}, {"fe80::1%eth0", 1}, {"2001:db8::7", 3}, {"b", 1}}));
  EXPECT_TRUE(IsLocalHost((*h)[0].host));
  auto f = ParseHostfile("[::1]:2\n2001:db8::7 slots=3\n[2001:db8::8] slots=1\n[2001:db8::9]\n",
                         "hosts6.txt");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Slots(*f),
            (Want{{"::1", 2}, {"2001:db8::7", 3}, {"2001:db8::8", 1}, {"2001:db8::9", 1}}));
  auto bad = ParseHostfile("2001:db8::7:3\n", "hosts6.txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("hosts6.txt:1"), std::string::npos);
}

TEST(Hosts, ParsesHostfiles) {
  auto h = ParseHostfile("# cluster\nnode1 slots=4\n\nnode2:2  # two\nnode3\n", "hosts.txt");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ((*h)[0].slots, 4);
  EXPECT_EQ((*h)[1].slots, 2);
  EXPECT_EQ((*h)[2].slots, 1);
  auto bad = ParseHostfile("node1 slots=4\nnode2 cores=2\n", "hosts.txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("hosts.txt:2"), std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(ParseHostfile("# nothing\n", "empty.txt").ok());
  // horovodrun reads "slots = 2" too; Open MPI's hostfiles add max_slots.
  h = ParseHostfile("a slots = 2\nb\tslots= 3 max_slots=8\nc slots =1\n", "spaced.txt");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ((*h)[0].slots, 2);
  EXPECT_EQ((*h)[1].slots, 3);
  EXPECT_EQ((*h)[2].slots, 1);
  h = ParseHostfile("a max_slots=8 slots=2\n", "either-order.txt");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ((*h)[0].slots, 2);
  for (const char* text :
       {"a slots=2 slots=3\n", "a slots=\n", "a slots=2 cores=4\n", "a max_slots=4\n",
        "a slots=2 max_slots=abc\n", "a slots=2 max_slots=\n", "a slots=4 max_slots=2\n"}) {
    EXPECT_FALSE(ParseHostfile(text, "bad.txt").ok()) << text;
  }
}

TEST(Hosts, PlacesRanksInOrderWithHorovodCrossRanks) {
  auto p = PlaceRanks(6, {{"a", 4}, {"b", 4}});
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 6u);
  EXPECT_EQ((*p)[3].host, "a");
  EXPECT_EQ((*p)[3].local_rank, 3);
  EXPECT_EQ((*p)[3].local_size, 4);
  EXPECT_EQ((*p)[4].host, "b");
  EXPECT_EQ((*p)[4].local_rank, 0);
  EXPECT_EQ((*p)[4].local_size, 2);
  EXPECT_EQ((*p)[4].cross_rank, 1);
  EXPECT_EQ((*p)[4].cross_size, 2);
  // Local rank 3 exists only on host a: its cross size is 1.
  EXPECT_EQ((*p)[3].cross_rank, 0);
  EXPECT_EQ((*p)[3].cross_size, 1);
}

TEST(Hosts, TooFewSlotsOrBadNpAreErrors) {
  auto p = PlaceRanks(9, {{"a", 4}, {"b", 4}});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("-np 9 asks for more processes than the 8 slot(s)"),
            std::string::npos)
      << p.status().message();
  EXPECT_FALSE(PlaceRanks(0, {{"a", 4}}).ok());
}

TEST(Hosts, LocalHostNames) {
  EXPECT_TRUE(IsLocalHost("localhost"));
  EXPECT_TRUE(IsLocalHost("LocalHost"));  // (names are not case-sensitive)
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof name - 1), 0);
  std::string upper = name;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_TRUE(IsLocalHost(upper)) << upper;
  EXPECT_TRUE(IsLocalHost("127.0.0.1"));
  EXPECT_FALSE(IsLocalHost("node-that-is-not-here"));
  EXPECT_FALSE(IsLocalHost("198.51.100.77"));  // (TEST-NET-2: no machine's)
}

// An address of one of this machine's interfaces is this machine (it was
// taken for a remote host, reached over ssh).
TEST(Hosts, AnAddressOfThisMachinesInterfacesIsLocal) {
  ifaddrs* all = nullptr;
  ASSERT_EQ(getifaddrs(&all), 0);
  int seen = 0;
  for (const ifaddrs* a = all; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    const int family = a->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw =
        family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr)
            : static_cast<const void*>(
                  &reinterpret_cast<const sockaddr_in6*>(a->ifa_addr)->sin6_addr);
    ASSERT_NE(inet_ntop(family, raw, text, sizeof text), nullptr);
    EXPECT_TRUE(IsLocalHost(text)) << text;
    ++seen;
  }
  freeifaddrs(all);
  EXPECT_GT(seen, 0);
}

}  // namespace
}  // namespace hora::horarun
