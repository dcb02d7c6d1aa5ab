// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// --output-filename DIR, as horovodrun's Gloo mode has it: each rank's
// stdout and stderr also go, as the rank wrote them (no [rank] prefix), to
// DIR/rank.<rank>/stdout and DIR/rank.<rank>/stderr, the rank zero-padded
// to the digits of the largest rank (rank.0 ... rank.9 for 10 ranks,
// rank.00 ... rank.10 for 11). The folders are made before any rank starts;
// the files are truncated when the job starts.
#pragma once

#include <cstddef>
#include <string>

#include "hora/status.h"

namespace hora::horarun {

// DIR/rank.<padded rank> for a job of `size` ranks.
std::string RankOutputDir(const std::string& dir, int rank, int size);

// Makes `dir` (with its parents) and each rank's folder in it.
Status MakeOutputDirs(const std::string& dir, int size);

// Opens `path` for writing (created 0644, truncated, close-on-exec); -1 and
// `error` when it cannot.
int OpenOutputFile(const std::string& path, std::string* error);

// Writes all of data[0, n) to `fd`, resuming after short writes; gives up
// quietly on an error (the file is a copy; the terminal still gets it).
void WriteFully(int fd, const char* data, size_t n);

}  // namespace hora::horarun
