// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "program_check.h"

#include <sys/stat.h>
#include <unistd.h>

namespace hora::horarun {
namespace {

enum class Found { kNone, kDirectory, kNotExecutable, kExecutable };

Found Look(const std::string& file) {
  struct stat st;
  if (stat(file.c_str(), &st) != 0) return Found::kNone;
  if (S_ISDIR(st.st_mode)) return Found::kDirectory;
  return access(file.c_str(), X_OK) == 0 ? Found::kExecutable : Found::kNotExecutable;
}

bool EndsWith(const std::string& s, const char* suffix) {
  const std::string x(suffix);
  return s.size() > x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

Status NotExecutable(const std::string& shown) {
  std::string how = EndsWith(shown, ".py")   ? "python3 " + shown
                    : EndsWith(shown, ".sh") ? "sh " + shown
                                             : "its interpreter";
  return InvalidArgument(shown + " is not executable; run it with " + how + ", or chmod +x " +
                         shown);
}

}  // namespace

Status CheckProgram(const std::string& program, const std::string& path) {
  if (program.find('/') != std::string::npos) {
    switch (Look(program)) {
      case Found::kExecutable:
        return Status::Ok();
      case Found::kNotExecutable:
        return NotExecutable(program);
      case Found::kDirectory:
        return InvalidArgument(program + " is a directory, not a program");
      case Found::kNone:
        return InvalidArgument(program + " was not found");
    }
  }
  std::string not_executable;
  for (size_t p = 0; p <= path.size();) {
    size_t q = path.find(':', p);
    if (q == std::string::npos) q = path.size();
    const std::string dir = q > p ? path.substr(p, q - p) : ".";
    p = q + 1;
    const std::string file = dir + "/" + program;
    const Found f = Look(file);
    if (f == Found::kExecutable) return Status::Ok();
    if (f == Found::kNotExecutable && not_executable.empty()) not_executable = file;
  }
  switch (Look(program)) {  // the current directory, which execvp does not search
    case Found::kNotExecutable:
      return NotExecutable(program);
    case Found::kExecutable:
      return InvalidArgument(
          program + " is in the current directory, which is not on PATH: run ./" + program);
    default:
      break;
  }
  if (!not_executable.empty()) return NotExecutable(not_executable);
  return InvalidArgument(program + " was not found (not on PATH, nor in the current directory)");
}

}  // namespace hora::horarun
