// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "output.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hora::horarun {
namespace {

// Writes every byte of `iov`, resuming after short writes.
void WriteAll(int fd, iovec* iov, int count) {
  while (count > 0) {
    const ssize_t w = ::writev(fd, iov, count);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;  // our own stdout is gone: nothing better to do
    }
    size_t done = static_cast<size_t>(w);
    while (count > 0 && done >= iov->iov_len) {
      done -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + done;
      iov->iov_len -= done;
    }
  }
}

}  // namespace

LineForwarder::LineForwarder(int rank, int out_fd, bool prefix, size_t max_line)
    : out_fd_(out_fd), prefix_on_(prefix), max_line_(max_line < 1 ? 1 : max_line) {
  SetRank(rank);
}

void LineForwarder::SetRank(int rank) { SetLabel(std::to_string(rank)); }

void LineForwarder::SetLabel(const std::string& label) {
  if (prefix_on_) prefix_ = "[" + label + "]: ";
}

void LineForwarder::Feed(const char* data, size_t n) {
  // Invariant: held_.size() < max_line_, so `room` is at least 1.
  while (n > 0) {
    const size_t room = max_line_ - held_.size();
    const void* nl = std::memchr(data, '\n', n < room ? n : room);
    size_t used;
    if (nl != nullptr) {  // the line ends within the bound: out whole
      used = static_cast<size_t>(static_cast<const char*>(nl) - data) + 1;
      Write(data, used);
      mid_line_ = false;
    } else if (n < room) {  // no end yet, and room for all of it
      used = n;
      held_.append(data, n);
    } else {  // max_line bytes without an end: out as a piece
      used = room;
      Write(data, used);
      mid_line_ = true;
    }
    data += used;
    n -= used;
  }
}

void LineForwarder::Flush() {
  if (held_.empty() && !mid_line_) return;
  Write("\n", 1);
  mid_line_ = false;
}

void LineForwarder::Write(const char* data, size_t n) {
  // One writev per line or piece, finished before the next: the ranks'
  // lines reach horarun's stdout and stderr only through here, so a line of
  // up to max_line bytes never mixes with another rank's.
  iovec iov[3];
  int count = 0;
  if (!mid_line_ && !prefix_.empty()) {
    iov[count++] = {const_cast<char*>(prefix_.data()), prefix_.size()};
  }
  if (!held_.empty()) iov[count++] = {held_.data(), held_.size()};
  iov[count++] = {const_cast<char*>(data), n};
  WriteAll(out_fd_, iov, count);
  held_.clear();
}

}  // namespace hora::horarun
