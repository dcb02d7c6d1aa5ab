// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Forwards one output stream of one rank (its stdout or its stderr) to
// horarun's own, each line prefixed with "[rank]: " (unless prefixing is
// off). An elastic worker's rank is the one of its current world.
//
// A line of up to max_line bytes (its newline included) goes out whole, in
// one write, so that lines of different ranks never mix. A longer line goes
// out in pieces of max_line bytes as they arrive, the prefix only before its
// first piece: at most max_line bytes are held back, and the work is linear
// in the bytes fed (each byte is scanned once and copied at most once).
// The price: another rank's lines may come between the pieces of a line
// longer than max_line.
//
// Not thread-safe; one forwarder per stream.
#pragma once

#include <cstddef>
#include <string>

namespace hora::horarun {

class LineForwarder {
 public:
  static constexpr size_t kDefaultMaxLine = 64 * 1024;

  // `max_line` must be at least 1.
  LineForwarder(int rank, int out_fd, bool prefix, size_t max_line = kDefaultMaxLine);

  // Takes bytes read from the rank; writes every line they complete, and a
  // piece of the current line once max_line bytes of it are held.
  void Feed(const char* data, size_t n);
  // At end of stream: writes what is held of the last line, and ends it with
  // a newline (also one whose pieces already went out).
  void Flush();

  // Bytes of the current line held back, waiting for its end or for enough
  // to make a piece; always less than max_line.
  size_t held() const { return held_.size(); }

  // The rank in the prefix of the lines that start from now on (an elastic
  // worker's rank in each world it joins).
  void SetRank(int rank);
  // Or another label ("[localhost/1]: ", an elastic worker in no world).
  void SetLabel(const std::string& label);

 private:
  // Writes, in one write where the fd takes it: the prefix if this is the
  // line's first piece, what is held, then `n` bytes of `data`.
  void Write(const char* data, size_t n);

  const int out_fd_;
  const bool prefix_on_;
  std::string prefix_;
  const size_t max_line_;
  std::string held_;
  bool mid_line_ = false;  // pieces of the current line are already out
};

}  // namespace hora::horarun
