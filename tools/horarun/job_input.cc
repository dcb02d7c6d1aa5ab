// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// A remote rank's start (job_run.h): its secret and environment fed to
// its remote shell's stdin as the pipe takes them, the shell's start line
// (kRemoteStartedLine) looked for in its output and taken out, and the
// start deadline's check: input never taken stops the job (an elastic
// worker alone), input taken without the line gets a warning.
#include <sys/ioctl.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>

#include "job.h"
#include "job_run.h"
#include "output_files.h"
#include "spawn.h"

namespace hora::horarun::job_internal {

void Job::FeedRank(Rank& r) {
  if (r.input.empty()) return;
  std::string error;
  const InputProgress progress =
      r.stdin_fd < 0 ? InputProgress::kDone : FeedInput(r.stdin_fd, r.input, &r.input_done, &error);
  if (progress == InputProgress::kPending) return;
  if (progress == InputProgress::kFailed) {
    std::fprintf(stderr,
                 "horarun: cannot pass the job secret and environment to rank %d on %s: %s\n",
                 r.placement.rank, r.placement.host.c_str(), error.c_str());
  }
  r.input = std::string();
  r.input_done = 0;
}

// A remote shell that has not read its rank's input by the start deadline
// (a host that does not answer, an ssh that hangs, a shell that does not
// read stdin) stops the job, naming it, where some of that input is still
// unwritten or unread in its stdin's pipe; where the remote command took
// it all (an ssh that connected and then hung, or a remote command that
// hides the shell's start line: horarun cannot tell them apart) horarun
// warns, naming it, and keeps looking for the line. An elastic worker is
// stopped alone, its host failed.
void Job::CheckInputs(Clock::time_point now) {
  for (auto& r : ranks_) {
    if (!r.awaiting_start || now < r.start_deadline) continue;
    r.start_deadline = Clock::time_point::max();  // (said once)
    if (!r.running || r.stopped || stopping_) {   // (its end says why)
      EndStartScan(r);
      continue;
    }
    int in_pipe = 0;  // (FIONREAD on a pipe's write end: the bytes not read yet)
    if (r.stdin_fd >= 0 && ioctl(r.stdin_fd, FIONREAD, &in_pipe) != 0) in_pipe = 0;
    const size_t written = r.input.empty() ? r.input_size : r.input_done;
    const size_t taken = written - std::min(written, static_cast<size_t>(in_pipe));
    char what[160];
    std::snprintf(what, sizeof what, "(%zu of %zu bytes taken from its stdin)", taken,
                  r.input_size);
    if (taken == r.input_size) {
      std::fprintf(stderr,
                   "horarun: warning: rank %d on %s has not started within the start timeout "
                   "(HORA_START_TIMEOUT_S=%g s): its remote command took its job secret and "
                   "environment %s, but its shell has not said it read them; is %s up?\n",
                   r.placement.rank, r.placement.host.c_str(), spec_.start_timeout_s, what,
                   r.placement.host.c_str());
      continue;
    }
    EndStartScan(r);
    std::fprintf(stderr,
                 "horarun: rank %d on %s did not take its job secret and environment within the "
                 "start timeout (HORA_START_TIMEOUT_S=%g s) %s: is %s reachable, and does its "
                 "remote shell pass stdin on?%s\n",
                 r.placement.rank, r.placement.host.c_str(), spec_.start_timeout_s, what,
                 r.placement.host.c_str(), driver_ ? " (this worker is stopped)" : "");
    r.input = std::string();
    r.input_done = 0;
    if (driver_) {
      StopWorker(r, now);
      HostFailed(r.placement.host, now);
    } else {
      BeginStop(1, true);
    }
  }
}

void Job::Forward(Rank& r, int s, const char* data, size_t n) {
  if (n == 0) return;
  r.forward[s]->Feed(data, n);
  if (r.files[s] >= 0) WriteFully(r.files[s], data, n);
}

void Job::ScanForStart(Rank& r, int s, const char* data, size_t n) {
  std::string& scan = r.start_scan[s];
  scan.append(data, n);
  const std::string_view marker = kRemoteStartedLine;
  size_t at = 0;  // the first byte not yet forwarded
  for (;;) {
    const size_t end = scan.find('\n', at);
    if (end == std::string::npos) break;
    std::string_view line = std::string_view(scan).substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // (a terminal's)
    // (The line's end: a remote command may put a label before it.)
    if (line.size() >= marker.size() && line.substr(line.size() - marker.size()) == marker) {
      Forward(r, s, scan.data(), at);  // what came before it (ssh's notices)
      Forward(r, s, scan.data() + end + 1, scan.size() - end - 1);
      scan = std::string();
      r.awaiting_start = false;
      EndStartScan(r);  // (the other stream's piece of a line)
      return;
    }
    at = end + 1;
  }
  // Whole lines that were not it go on; a piece of a line waits for its end
  // (unless it is already longer than a labelled start line would be).
  if (scan.size() - at > marker.size() + 256) at = scan.size();
  Forward(r, s, scan.data(), at);
  scan.erase(0, at);
}

void Job::EndStartScan(Rank& r) {
  r.awaiting_start = false;
  for (int s = 0; s < 2; ++s) {
    Forward(r, s, r.start_scan[s].data(), r.start_scan[s].size());
    r.start_scan[s] = std::string();
  }
}

}  // namespace hora::horarun::job_internal
