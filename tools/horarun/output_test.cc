// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "output.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

namespace hora::horarun {
namespace {

// An in-memory file that a forwarder writes to.
class Sink {
 public:
  Sink() : fd_(memfd_create("horarun-output-test", MFD_CLOEXEC)) {}
  ~Sink() { close(fd_); }
  int fd() const { return fd_; }
  std::string Contents() const {
    std::string out;
    char buf[65536];
    for (off_t at = 0;;) {
      const ssize_t n = pread(fd_, buf, sizeof buf, at);
      if (n <= 0) return out;
      out.append(buf, static_cast<size_t>(n));
      at += n;
    }
  }

 private:
  int fd_;
};

// A socket that keeps each write as one message, to see what each write held.
class Writes {
 public:
  Writes() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds_), 0); }
  ~Writes() {
    close(fds_[0]);
    close(fds_[1]);
  }
  int fd() const { return fds_[0]; }
  // The writes made since the last call, one string each.
  std::vector<std::string> Take() {
    std::vector<std::string> out;
    char buf[65536];
    for (ssize_t n; (n = recv(fds_[1], buf, sizeof buf, MSG_DONTWAIT)) > 0;) {
      out.emplace_back(buf, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  int fds_[2] = {-1, -1};
};

void Feed(LineForwarder& f, const std::string& s) { f.Feed(s.data(), s.size()); }

TEST(LineForwarder, PrefixesEveryLine) {
  Sink sink;
  LineForwarder f(3, sink.fd(), true);
  Feed(f, "one\ntwo\n\nthree\n");
  EXPECT_EQ(sink.Contents(), "[3]: one\n[3]: two\n[3]: \n[3]: three\n");
  LineForwarder plain(3, sink.fd(), false);
  Feed(plain, "four\n");
  EXPECT_EQ(sink.Contents(), "[3]: one\n[3]: two\n[3]: \n[3]: three\nfour\n");
}

TEST(LineForwarder, ANewRankPrefixesTheLinesThatStartAfter) {
  // (An elastic worker's rank in each new world.) A line under way when
  // the rank changes keeps the prefix it went out with.
  Sink sink;
  LineForwarder f(3, sink.fd(), true, /*max_line=*/4);
  Feed(f, "a\nlong");  // (its first piece goes out with [3])
  f.SetRank(1);
  Feed(f, "er\nb\n");
  EXPECT_EQ(sink.Contents(), "[3]: a\n[3]: longer\n[1]: b\n");
  f.SetLabel("localhost/3");  // (a worker in no world)
  Feed(f, "d\n");
  LineForwarder plain(3, sink.fd(), false);
  plain.SetRank(1);
  plain.SetLabel("x");
  Feed(plain, "c\n");
  EXPECT_EQ(sink.Contents(), "[3]: a\n[3]: longer\n[1]: b\n[localhost/3]: d\nc\n");
}

TEST(LineForwarder, JoinsLinesSplitAcrossFeeds) {
  Writes writes;
  LineForwarder f(1, writes.fd(), true);
  Feed(f, "hel");
  EXPECT_TRUE(writes.Take().empty());
  EXPECT_EQ(f.held(), 3u);
  Feed(f, "lo\nwor");
  Feed(f, "ld\n");
  // Each line is one write, prefix included.
  EXPECT_EQ(writes.Take(), (std::vector<std::string>{"[1]: hello\n", "[1]: world\n"}));
  EXPECT_EQ(f.held(), 0u);
}

TEST(LineForwarder, FlushEndsTheLastLine) {
  Sink sink;
  LineForwarder f(0, sink.fd(), true);
  f.Flush();  // nothing held: nothing written
  Feed(f, "done\nno newline");
  f.Flush();
  f.Flush();
  EXPECT_EQ(sink.Contents(), "[0]: done\n[0]: no newline\n");
}

TEST(LineForwarder, LongLinesGoOutInPiecesWithOnePrefix) {
  Writes writes;
  LineForwarder f(2, writes.fd(), true, /*max_line=*/4);
  Feed(f, "abcd\n");  // 5 bytes with its newline: over the bound
  Feed(f, "abc\n");   // exactly the bound: whole
  Feed(f, "0123456789");
  EXPECT_EQ(f.held(), 2u);
  Feed(f, "ab\nxy");
  f.Flush();
  EXPECT_EQ(writes.Take(), (std::vector<std::string>{"[2]: abcd", "\n", "[2]: abc\n", "[2]: 0123",
                                                     "4567", "89ab", "\n", "[2]: xy\n"}));
}

TEST(LineForwarder, HugeLineInBoundedMemory) {
  // 10 MiB without a newline, fed in uneven chunks: every byte arrives, in
  // order, after one prefix, and what is held never reaches the bound (the
  // old forwarder kept the whole line and rescanned it on every Feed).
  const size_t size = 10 << 20;
  std::string line(size, '\0');
  for (size_t i = 0; i < size; ++i) line[i] = static_cast<char>('a' + (i * 7 + i / 4099) % 26);
  Sink sink;
  LineForwarder f(5, sink.fd(), true);
  size_t max_held = 0;
  for (size_t at = 0, chunk = 1; at < size; chunk = chunk * 3 % 70001 + 1) {
    const size_t n = std::min(chunk, size - at);
    f.Feed(line.data() + at, n);
    at += n;
    max_held = std::max(max_held, f.held());
  }
  EXPECT_LT(max_held, LineForwarder::kDefaultMaxLine);
  // All but what is held is already out.
  EXPECT_EQ(sink.Contents().size(), 5 + size - f.held());
  f.Flush();
  EXPECT_EQ(f.held(), 0u);
  const std::string out = sink.Contents();
  ASSERT_EQ(out.size(), 5 + size + 1);
  EXPECT_EQ(out.substr(0, 5), "[5]: ");
  EXPECT_TRUE(out.compare(5, size, line) == 0) << "the line's bytes changed";
  EXPECT_EQ(out.back(), '\n');

  // A line after it is whole and prefixed again.
  Feed(f, "next\n");
  EXPECT_EQ(sink.Contents().substr(out.size()), "[5]: next\n");
}

}  // namespace
}  // namespace hora::horarun
