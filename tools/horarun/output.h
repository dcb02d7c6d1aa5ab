// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Forwards the ranks' output line by line, each line prefixed with "[rank]: "
// (unless prefixing is off), to horarun's own stdout or stderr, so that lines
// of different ranks never interleave mid-line.
#pragma once

#include <string>

namespace hora::horarun {

class LineForwarder {
 public:
  LineForwarder(int rank, int out_fd, bool prefix)
      : rank_(rank), out_fd_(out_fd), prefix_(prefix) {}

  // Appends bytes read from the rank; writes every completed line.
  void Feed(const char* data, size_t n);
  // Writes what is left (a last line without a newline) at end of stream.
  void Flush();

 private:
  void Emit(const char* line, size_t n);

  int rank_;
  int out_fd_;
  bool prefix_;
  std::string partial_;
};

}  // namespace hora::horarun
