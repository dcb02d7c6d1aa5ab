// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "output_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hora::horarun {
namespace {

Status MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Status::Ok();
    return InvalidArgument("--output-filename: '" + path + "' exists and is not a directory");
  }
  return InvalidArgument("--output-filename: cannot create '" + path +
                         "': " + std::strerror(errno));
}

}  // namespace

std::string RankOutputDir(const std::string& dir, int rank, int size) {
  const size_t width = std::to_string(size > 1 ? size - 1 : 0).size();
  std::string r = std::to_string(rank);
  if (r.size() < width) r.insert(0, width - r.size(), '0');
  return dir + "/rank." + r;
}

Status MakeOutputDirs(const std::string& dir, int size) {
  for (size_t p = dir.find('/', 1); p != std::string::npos; p = dir.find('/', p + 1)) {
    HORA_RETURN_IF_ERROR(MakeDir(dir.substr(0, p)));
  }
  HORA_RETURN_IF_ERROR(MakeDir(dir));
  for (int r = 0; r < size; ++r) HORA_RETURN_IF_ERROR(MakeDir(RankOutputDir(dir, r, size)));
  return Status::Ok();
}

int OpenOutputFile(const std::string& path, std::string* error) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) *error = "cannot open '" + path + "': " + std::strerror(errno);
  return fd;
}

void WriteFully(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    data += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace hora::horarun
