// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// The running job of RunJob (job.h), shared by its files: job_run.cc starts
// the ranks and runs the loop; job_elastic.cc is elastic mode's part of it
// (the driver's rounds, host discovery, workers started and stopped).
#pragma once

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "death_watch.h"
#include "elastic_driver.h"
#include "host_discovery.h"
#include "job.h"
#include "launch/failure_report.h"
#include "output.h"
#include "store/tcp_store_client.h"
#include "watcher.h"

namespace hora::horarun::job_internal {

using Clock = std::chrono::steady_clock;

Clock::duration Seconds(double s);
int ExitCodeOf(int status);
std::string DescribeExit(int status);

// One rank, from its start until its process group has ended.
struct Rank {
  Placement placement;
  pid_t pid = -1;        // also its process group's id
  bool running = false;  // started, and not seen dead yet
  // The group outlives the rank while processes the rank started run in
  // it. Live from the start until no live member is left, or it got
  // SIGKILL at group_kill_at (the grace period after the rank's end). The
  // rank is reaped only then: until that, its zombie keeps the group's id
  // from being reused, so that signals to -pid reach no other group.
  bool group_live = false;
  Clock::time_point group_kill_at = Clock::time_point::max();
  Clock::time_point group_check_at{};  // when to look for live members again
  int fds[2] = {-1, -1};               // stdout, stderr read ends
  int stdin_fd = -1;                   // remote ranks: the write end of their stdin
  // Remote ranks: what their stdin still has to get (RemoteInput), fed as
  // the remote shell reads it; cleared once written (or given up).
  std::string input;
  size_t input_done = 0;
  size_t input_size = 0;  // (all of it, for the message)
  // Remote ranks: until their shell's kRemoteStartedLine comes (on stderr,
  // or stdout where a remote command merges them; the bytes of each held
  // up to whole lines meanwhile), by start_deadline.
  bool awaiting_start = false;
  Clock::time_point start_deadline = Clock::time_point::max();
  std::string start_scan[2];
  // Elastic mode: stopped by horarun (left out of the job), and when it
  // gets SIGKILL if it has not ended by then.
  bool stopped = false;
  Clock::time_point stop_kill_at = Clock::time_point::max();
  bool frozen_killed = false;  // taken out as stopped or silent while a round waited for it
  // Elastic mode: its slot is gone (the discovery script's). Out of the
  // planner's count, it trains on with its world up to the commit where
  // every member hears of it; stopped once the next world has formed.
  bool leaving = false;
  int files[2] = {-1, -1};  // --output-filename: copies of stdout, stderr
  std::unique_ptr<LineForwarder> forward[2];
};

class Job {
 public:
  Job(const JobSpec& spec, int sigfd, const sigset_t& blocked, RankWatcher& watcher)
      : spec_(spec), sigfd_(sigfd), blocked_(blocked), watcher_(watcher) {}

  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Starts every rank; stops at the first that cannot start.
  void Launch();
  // Until every rank's group has ended and its output is forwarded.
  void Run();
  int exit_code() const {
    if (driver_ && !stopping_) {
      // (A worker that failed after another finished: not a success.)
      if (done_) return failed_after_done_ ? last_failure_ : 0;
      return last_failure_ != 0 ? last_failure_ : 1;
    }
    return exit_code_;
  }

 private:
  void BeginStop(int code, bool at_once);
  void SignalGroups(int sig);
  void Escalate(Clock::time_point now);
  void EndGroups(Clock::time_point now);
  void EndGroup(Rank& r);
  void HandleSignals();
  void Died(Rank& r, int status);
  // The first failure a rank reported in the store, if any.
  std::optional<FailureReport> FirstFailure();
  std::string JobId() const;  // HORA_JOB_ID (empty: none)
  void CloseOutput(Rank& r, int s);
  void FeedRank(Rank& r);
  void CheckInputs(Clock::time_point now);
  // A rank's output (s: 0 stdout, 1 stderr) to the terminal and its files,
  // a remote rank's start line taken out (ScanForStart).
  void Forward(Rank& r, int s, const char* data, size_t n);
  void ScanForStart(Rank& r, int s, const char* data, size_t n);
  void EndStartScan(Rank& r);  // what the scan held, on
  // Starts a rank (elastic mode: a worker) at `placement`; false if it
  // could not start (said on stderr). An elastic worker gets the place
  // it would have if every live worker came (Prospects).
  bool StartRank(const Placement& placement,
                 const std::optional<ProspectivePlace>& prospect = std::nullopt);
  // Elastic mode: the places of `starting` (their ids' placements) in the
  // world every live worker and they would form.
  std::vector<std::optional<ProspectivePlace>> Prospects(const std::vector<Placement>& starting,
                                                         Clock::time_point now) const;
  // Elastic mode (job_elastic.cc): the driver's round, and what it decided
  // done; and, every second with a discovery script, its hosts.
  void PollDriver(Clock::time_point now);
  void Discover(Clock::time_point now, Result<std::string> output);
  // Stops worker `r` (left out of the job): SIGTERM, SIGKILL after the
  // grace period.
  void StopWorker(Rank& r, Clock::time_point now);
  // A worker on `host` failed: with a discovery script, the host gets no
  // new worker for its cooldown (JobSpec::Elastic::cooldown_s).
  void HostFailed(const std::string& host, Clock::time_point now);
  // Takes out the workers a round waits for that are stopped (SIGSTOP) or
  // that a peer found silent.
  void TakeOutFrozen(Clock::time_point now);
  // A fixed job: says so when a local rank's process stays stopped (SIGSTOP,
  // a debugger), which horarun would otherwise wait for without a word
  // once the others ended with 0 (they fail on a stopped peer, but may
  // catch that and end well).
  void ReportStopped(Clock::time_point now);

  const JobSpec& spec_;
  const int sigfd_;
  const sigset_t& blocked_;
  RankWatcher& watcher_;
  // Remote ranks must have taken their input by then (the start timeout).
  DeathWatch deaths_;
  std::deque<Rank> ranks_;  // (elastic mode adds workers while the loop holds pointers)
  std::string cwd_;
  int exit_code_ = 0;
  // Stopping: a failed rank first gives the others a moment to notice the
  // lost peer and report it themselves (term_at_), then their groups get
  // SIGTERM, and SIGKILL after the grace period (kill_at_). A signal to
  // horarun skips the first step.
  bool stopping_ = false, termed_ = false;
  bool rank_ended_told_ = false;  // RankEndedKey set (launch/failure_report.h)
  bool stdin_given_ = false;      // horarun's stdin went to a local rank
  // The first rank that ended with 0 while others still ran ("rank 1 (pid
  // 42 on host)"): said when a rank then fails (it may have waited for it).
  std::string ended_well_;
  Clock::time_point term_at_{}, kill_at_ = Clock::time_point::max();
  // Elastic mode: the job's store (horarun's own server) and the driver
  // that places workers in generations; done_ once a worker ended with 0
  // (the job is finishing: no more generations, and no end for lack of
  // workers); the last failure's exit code.
  std::unique_ptr<TcpStoreClient> store_;
  std::unique_ptr<ElasticDriver> driver_;
  bool done_ = false;
  std::string done_by_;             // the worker that ended with 0 first
  bool failed_after_done_ = false;  // a worker failed after that
  int last_failure_ = 0;
  Clock::time_point frozen_check_at_{};  // TakeOutFrozen's next look
  // ReportStopped: its next look, and per rank (by pid) since when it has
  // been seen stopped and when it may be said again.
  Clock::time_point stopped_check_at_{};
  std::map<pid_t, std::pair<Clock::time_point, Clock::time_point>> stopped_since_;
  // Host discovery: when to run the script next.
  Clock::time_point discover_at_{};
  std::unique_ptr<BackgroundDiscovery> discovery_;  // (elastic, with a script)
  std::string discovery_error_;                     // the script's last failure, said once
  // Hosts left out, until when (max(): for good), and their failures.
  std::map<std::string, Clock::time_point> left_out_;
  std::map<std::string, int> failures_;
};

}  // namespace hora::horarun::job_internal
