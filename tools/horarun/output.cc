// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "output.h"

#include <unistd.h>

#include <cerrno>

namespace hora::horarun {
namespace {

void WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;  // our own stdout is gone: nothing better to do
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

void LineForwarder::Feed(const char* data, size_t n) {
  partial_.append(data, n);
  size_t start = 0;
  for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
    Emit(partial_.data() + start, nl - start + 1);
  }
  partial_.erase(0, start);
}

void LineForwarder::Flush() {
  if (partial_.empty()) return;
  partial_ += '\n';
  Emit(partial_.data(), partial_.size());
  partial_.clear();
}

void LineForwarder::Emit(const char* line, size_t n) {
  // One write per line: writes to a pipe or terminal of up to PIPE_BUF
  // bytes are atomic, so concurrent ranks' lines do not mix.
  std::string out = prefix_ ? "[" + std::to_string(rank_) + "]: " : std::string();
  out.append(line, n);
  WriteAll(out_fd_, out.data(), out.size());
}

}  // namespace hora::horarun
