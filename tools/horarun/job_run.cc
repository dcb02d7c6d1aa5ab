// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// RunJob: starts the ranks, then one loop until every rank's process group
// has ended and its output is forwarded. Each round: the remote ranks'
// input deadline, the stop's and the groups' deadlines, a poll of the
// signalfd, the output pipes and the remote ranks' stdin pipes still to be
// fed, the ranks' deaths (before any output: their order decides who failed
// first), then the output and the input.
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "death_watch.h"
#include "elastic_driver.h"
#include "hosts.h"
#include "job.h"
#include "job_run.h"
#include "output.h"
#include "output_files.h"
#include "process_group.h"
#include "spawn.h"
#include "store/tcp_store_client.h"
#include "watcher.h"

namespace hora::horarun {
namespace job_internal {

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) {
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

Job::~Job() {
  for (auto& r : ranks_) {
    for (int fd : {r.fds[0], r.fds[1], r.stdin_fd, r.files[0], r.files[1]}) {
      if (fd >= 0) close(fd);
    }
    if (r.group_live) waitpid(r.pid, nullptr, WNOHANG);
  }
}

void Job::Launch() {
  const int size = static_cast<int>(spec_.placements.size());
  const uint16_t port = spec_.elastic ? spec_.elastic->store_port : spec_.store_port;
  if (port != 0) {
    auto store = TcpStoreClient::Connect(
        {"127.0.0.1", port},
        spec_.env.count("HORA_SECRET") ? spec_.env.at("HORA_SECRET") : std::string(),
        std::chrono::seconds(10));
    if (store.ok()) {
      store_ = std::move(*store);
    } else if (spec_.elastic) {
      std::fprintf(stderr, "horarun: elastic mode: cannot reach its own store: %s\n",
                   store.status().ToString().c_str());
      BeginStop(1, true);
      return;
    }  // (else: failures are named by their exits alone)
  }
  if (spec_.elastic) {
    driver_ = std::make_unique<ElasticDriver>(*store_, JobId(), spec_.elastic->settings);
  }
  char cwd_buf[4096];
  cwd_ = getcwd(cwd_buf, sizeof cwd_buf) ? cwd_buf : ".";
  const auto prospects = Prospects(spec_.placements, Clock::now());
  for (int i = 0; i < size && !stopping_; ++i) {
    const auto k = static_cast<size_t>(i);
    if (!StartRank(spec_.placements[k], prospects[k])) BeginStop(1, true);
  }
}

std::vector<std::optional<ProspectivePlace>> Job::Prospects(const std::vector<Placement>& starting,
                                                            Clock::time_point now) const {
  std::vector<std::optional<ProspectivePlace>> out(starting.size());
  if (!driver_) return out;
  std::vector<std::pair<std::string, std::string>> newcomers;
  for (const Placement& p : starting) newcomers.emplace_back(WorkerId(p), p.host);
  const std::map<std::string, Placement> next = driver_->planner().Prospect(newcomers, now);
  for (size_t i = 0; i < starting.size(); ++i) {
    auto it = next.find(newcomers[i].first);
    if (it != next.end()) out[i] = ProspectivePlace{it->second, static_cast<int>(next.size())};
  }
  return out;
}

bool Job::StartRank(const Placement& placement, const std::optional<ProspectivePlace>& prospect) {
  const int i = static_cast<int>(ranks_.size());
  ranks_.emplace_back();  // (a deque: the other ranks stay where they are)
  Rank& r = ranks_.back();
  r.placement = placement;
  const RankLaunch launch = PlanRankLaunch(spec_, r.placement, cwd_, prospect);
  for (int s = 0; s < 2; ++s) {
    r.forward[s] = std::make_unique<LineForwarder>(i, s == 0 ? STDOUT_FILENO : STDERR_FILENO,
                                                   spec_.prefix_output);
    // (An elastic worker shows its id until a world gives it a rank.)
    if (driver_) r.forward[s]->SetLabel(WorkerId(r.placement));
  }
  if (!spec_.output_dir.empty()) {
    const std::string dir =
        RankOutputDir(spec_.output_dir, i, static_cast<int>(spec_.placements.size()));
    std::string error;
    for (int s = 0; s < 2 && error.empty(); ++s) {
      r.files[s] = OpenOutputFile(dir + (s == 0 ? "/stdout" : "/stderr"), &error);
    }
    if (!error.empty()) {
      std::fprintf(stderr, "horarun: --output-filename: %s\n", error.c_str());
      for (int fd : r.files) {
        if (fd >= 0) close(fd);
      }
      ranks_.pop_back();  // (nothing refers to it yet)
      return false;
    }
  }
  // (As mpirun's to rank 0: horarun's stdin is the first local rank's, the
  // others read none.)
  const RankInput input = launch.input   ? RankInput::kPipe
                          : stdin_given_ ? RankInput::kNone
                                         : RankInput::kHorarunsStdin;
  stdin_given_ = stdin_given_ || input == RankInput::kHorarunsStdin;
  auto p = SpawnRank(i, launch.argv, launch.envs, blocked_, input, watcher_.announce_fd());
  if (!p) {
    for (int fd : r.files) {
      if (fd >= 0) close(fd);
    }
    ranks_.pop_back();
    return false;
  }
  r.pid = p->pid;
  if (driver_) driver_->Started(WorkerId(r.placement), r.placement.host, Clock::now());
  deaths_.Add(r.pid);
  r.running = r.group_live = true;
  r.fds[0] = p->out_fd;
  r.fds[1] = p->err_fd;
  r.stdin_fd = p->stdin_fd;
  if (launch.input) {
    r.input = std::move(*launch.input);
    r.input_size = r.input.size();
    r.awaiting_start = true;
    r.start_deadline = Clock::now() + Seconds(spec_.start_timeout_s);
    FeedRank(r);  // what the pipe takes now; Run feeds the rest
  }
  return true;
}

void Job::BeginStop(int code, bool at_once) {
  if (stopping_) return;
  stopping_ = true;
  exit_code_ = code;
  term_at_ =
      Clock::now() + (at_once ? Clock::duration{} : Seconds(std::min(3.0, spec_.stop_grace_s)));
  kill_at_ = term_at_ + Seconds(spec_.stop_grace_s);
}

void Job::SignalGroups(int sig) {
  for (auto& r : ranks_) {
    if (!r.group_live) continue;
    if (sig == SIGTERM) {
      TerminateGroup(r.pid);
    } else {
      kill(-r.pid, sig);
    }
  }
}

void Job::Escalate(Clock::time_point now) {
  if (!stopping_) return;
  if (!termed_ && now >= term_at_) {
    SignalGroups(SIGTERM);
    // Remote ranks: closing their stdin starts their watcher's TERM and
    // KILL on their host (our signals reach only the local rsh).
    for (auto& r : ranks_) {
      if (r.stdin_fd >= 0) close(std::exchange(r.stdin_fd, -1));
    }
    termed_ = true;
  }
  if (now >= kill_at_) SignalGroups(SIGKILL);
}

// The groups of dead ranks: ended once no live member is left; whatever is
// left at the deadline gets SIGKILL.
// Looking reads /proc, so a group is looked at most every 100 ms.
void Job::EndGroups(Clock::time_point now) {
  for (auto& r : ranks_) {
    if (!r.group_live || r.running) continue;
    if (now >= std::min(r.group_kill_at, kill_at_)) {
      kill(-r.pid, SIGKILL);
      EndGroup(r);
    } else if (now >= r.group_check_at) {
      if (!GroupHasLiveMember(r.pid)) EndGroup(r);
      r.group_check_at = now + std::chrono::milliseconds(100);
    }
  }
}

void Job::ReportStopped(Clock::time_point now) {
  // Looking reads /proc: once a second. Stopped for 5 s before it is said,
  // then once a minute while it stays so.
  if (driver_ || stopping_ || now < stopped_check_at_) return;
  stopped_check_at_ = now + std::chrono::seconds(1);
  std::string ended;
  for (const auto& r : ranks_) {
    if (!r.running && r.pid > 0)
      ended += (ended.empty() ? "" : ", ") + std::to_string(r.placement.rank);
  }
  for (const auto& r : ranks_) {
    if (!r.running || !IsLocalHost(r.placement.host) || !GroupHasStoppedMember(r.pid)) {
      stopped_since_.erase(r.pid);
      continue;
    }
    const auto it = stopped_since_.try_emplace(r.pid, now, now + std::chrono::seconds(5)).first;
    if (now < it->second.second) continue;
    it->second.second = now + std::chrono::seconds(60);
    const long held =
        std::chrono::duration_cast<std::chrono::seconds>(now - it->second.first).count();
    std::fprintf(stderr,
                 "horarun: rank %d (pid %d on %s) has been stopped for %ld s (SIGSTOP, or a "
                 "debugger)%s; horarun waits for it to end (kill -CONT -%d lets it go on; "
                 "Ctrl-C stops the job)\n",
                 r.placement.rank, r.pid, r.placement.host.c_str(), held,
                 ended.empty() ? "" : ("; ranks that ended: " + ended).c_str(), r.pid);
  }
}

void Job::EndGroup(Rank& r) {
  r.group_live = false;
  watcher_.Forget(r.pid);
  waitpid(r.pid, nullptr, WNOHANG);  // a zombie: frees the group's id
}

void Job::HandleSignals() {
  signalfd_siginfo info;
  while (read(sigfd_, &info, sizeof info) == sizeof info) {
    if (info.ssi_signo == SIGCHLD) continue;  // deaths_ has the ranks'
    std::fprintf(stderr, "horarun: got signal %u (%s); stopping all ranks\n", info.ssi_signo,
                 strsignal(static_cast<int>(info.ssi_signo)));
    BeginStop(128 + static_cast<int>(info.ssi_signo), true);
  }
  for (const Death& death : deaths_.TakeDeaths()) {  // in the order they died
    for (auto& r : ranks_) {
      if (r.running && r.pid == death.pid) Died(r, death.status);
    }
  }
}

void Job::Died(Rank& r, int status) {
  r.running = false;
  if (r.stdin_fd >= 0) close(std::exchange(r.stdin_fd, -1));
  // What the rank started goes with it, also after a success: SIGTERM now,
  // SIGKILL after the grace period (EndGroups). Its output keeps flowing
  // meanwhile.
  if (GroupHasLiveMember(r.pid)) {
    TerminateGroup(r.pid);
    r.group_kill_at = Clock::now() + Seconds(spec_.stop_grace_s);
  } else {
    EndGroup(r);  // the usual case: the rank left nothing behind
  }
  const int code = ExitCodeOf(status);
  if (driver_) {
    // A worker's end is not the job's: the planner re-forms the world
    // without it, or ends the job when too few are left.
    const bool member = driver_->planner().InLatestGeneration(WorkerId(r.placement));
    driver_->Ended(WorkerId(r.placement), Clock::now());
    if (r.stopped) return;  // (left out by horarun: its exit says nothing of the job)
    if (code == 0) {
      // The work is done: no more worlds; a worker still waiting in init()
      // is told so, and ends.
      if (!done_) done_by_ = WorkerId(r.placement);
      done_ = true;
      driver_->Finish("the job is finishing: worker " + WorkerId(r.placement) +
                      " completed its work");
    } else if (!termed_) {
      last_failure_ = code;
      std::fprintf(stderr, "horarun: worker %s (pid %d) %s%s\n", WorkerId(r.placement).c_str(),
                   r.pid, DescribeExit(status).c_str(),
                   done_ || stopping_ ? "" : "; the others go on without it");
      if (done_ && member && !failed_after_done_) {
        // Horovod's rule: a worker's success ends an elastic job. One that
        // was still training then fails: so does the job. (A new worker that
        // never had a world, told the job is finishing, is not one.)
        failed_after_done_ = true;
        std::fprintf(stderr,
                     "horarun: elastic: worker %s ended with 0 (its work completed) while "
                     "worker %s had not finished; the job fails (a worker's success ends an "
                     "elastic job: end every worker's training at the same step)\n",
                     done_by_.c_str(), WorkerId(r.placement).c_str());
      }
      // (A new worker that gave up waiting for a world says nothing of its
      // host.)
      if (driver_->planner().WasMember(WorkerId(r.placement))) {
        HostFailed(r.placement.host, Clock::now());
      }
    }
    return;
  }
  if (!termed_ && !rank_ended_told_ && store_ && !JobId().empty()) {
    // (Ranks still connecting would wait for it: they stop, naming it.)
    rank_ended_told_ = true;
    const std::string why = "rank " + std::to_string(r.placement.rank) + " (pid " +
                            std::to_string(r.pid) + " on " + r.placement.host + ") " +
                            DescribeExit(status) + ", while this rank was connecting to it";
    (void)store_->Set(RankEndedKey(JobId()), Bytes(why.begin(), why.end()));
  }
  if (code == 0 && !termed_ && !stopping_ && ended_well_.empty()) {
    ended_well_ = "rank " + std::to_string(r.placement.rank) + " (pid " + std::to_string(r.pid) +
                  " on " + r.placement.host + ")";
  }
  if (code != 0 && !termed_) {  // not one we stopped ourselves
    if (!stopping_) {
      // The rank that failed first by its own account: this one may only
      // have lost it.
      if (std::optional<FailureReport> first = FirstFailure()) {
        std::fprintf(stderr, "horarun: %s failed first: %s\n", first->who.c_str(),
                     first->what.c_str());
      } else if (!ended_well_.empty()) {
        // (A script that returned early on one rank: the others waited for it.)
        std::fprintf(stderr,
                     "horarun: note: %s had ended with exit code 0 while the others still ran "
                     "(where they waited for it, that is why they failed)\n",
                     ended_well_.c_str());
      }
    }
    std::fprintf(stderr, "horarun: rank %d (pid %d on %s) %s%s\n", r.placement.rank, r.pid,
                 r.placement.host.c_str(), DescribeExit(status).c_str(),
                 stopping_ ? "" : "; stopping the other ranks");
    BeginStop(code, false);
  }
}

void Job::CloseOutput(Rank& r, int s) {
  if (!r.start_scan[s].empty()) {  // (a shell that ended before its start line)
    Forward(r, s, r.start_scan[s].data(), r.start_scan[s].size());
    r.start_scan[s] = std::string();
  }
  r.forward[s]->Flush();
  close(r.fds[s]);
  r.fds[s] = -1;
}

void Job::Run() {
  Clock::time_point groups_ended{};
  for (;;) {
    const auto now = Clock::now();
    CheckInputs(now);
    Escalate(now);
    EndGroups(now);
    ReportStopped(now);
    bool any_live = false, any_open = false;
    std::vector<pollfd> pfds = {{sigfd_, POLLIN, 0}, {deaths_.fd(), POLLIN, 0}};
    std::vector<std::pair<Rank*, int>> owners;
    for (auto& r : ranks_) {
      any_live = any_live || r.group_live;
      for (int s = 0; s < 2; ++s) {
        if (r.fds[s] >= 0) {
          pfds.push_back({r.fds[s], POLLIN, 0});
          owners.push_back({&r, s});
          any_open = true;
        }
      }
      if (!r.input.empty() && r.stdin_fd >= 0) {
        pfds.push_back({r.stdin_fd, POLLOUT, 0});
        owners.push_back({&r, 2});
      }
    }
    // (With a discovery script, a job with no worker left goes on: free
    // slots get workers again, or the planner ends it after
    // --elastic-timeout below --min-np.)
    const bool refills = driver_ && !spec_.elastic->discovery_script.empty() && !stopping_ &&
                         !done_ && !driver_->planner().ended();
    if (!any_live && !any_open && !refills) return;
    if (!any_live && !refills) {
      // Processes that left their rank's group (setsid) may hold its pipes
      // open: drain briefly, then go.
      if (groups_ended == Clock::time_point{}) groups_ended = now;
      if (now - groups_ended > std::chrono::seconds(2)) {
        for (auto& r : ranks_) {
          for (int s = 0; s < 2; ++s) {
            if (r.fds[s] >= 0) CloseOutput(r, s);
          }
        }
        return;
      }
    }
    // (Elastic mode: the store is read for workers' arrivals at every wake,
    // at least every 20 ms.)
    if (poll(pfds.data(), pfds.size(), driver_ ? 20 : 200) < 0 && errno != EINTR) {
      // (ENOMEM, say: horarun can no longer watch its ranks. It stops them,
      // saying why, rather than leaving with 0 and the ranks to PDEATHSIG.)
      if (!stopping_) {
        std::fprintf(stderr,
                     "horarun: cannot wait for the ranks' output any more (poll: "
                     "%s); stopping every rank\n",
                     std::strerror(errno));
        BeginStop(1, true);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      HandleSignals();  // (deaths and signals still: the loop ends once the ranks have)
      continue;
    }
    // Deaths before output: a rank's output can wait, the order of deaths
    // must be read while the kernel still has it.
    HandleSignals();
    // (After the deaths just reaped: a world is formed without them.)
    PollDriver(Clock::now());
    for (size_t k = 2; k < pfds.size(); ++k) {
      if (!(pfds[k].revents & (POLLIN | POLLOUT | POLLHUP | POLLERR))) continue;
      auto [r, s] = owners[k - 2];
      if (s == 2) {  // a remote rank's stdin takes more
        FeedRank(*r);
        continue;
      }
      char buf[65536];
      const ssize_t n = read(r->fds[s], buf, sizeof buf);
      if (n > 0 && r->awaiting_start) {
        ScanForStart(*r, s, buf, static_cast<size_t>(n));
      } else if (n > 0) {
        Forward(*r, s, buf, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        CloseOutput(*r, s);
      }
    }
  }
}

}  // namespace job_internal

sigset_t JobSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&set, sig);
  return set;
}

int RunJob(const JobSpec& spec) {
  const sigset_t blocked = JobSignals();
  // The caller's mask comes back at the end: horarun's main keeps these
  // signals blocked through its cleanup, so one that arrives after the last
  // read below cannot kill it before that (a pending one dies with it).
  sigset_t previous;
  sigprocmask(SIG_BLOCK, &blocked, &previous);
  const int sigfd = signalfd(-1, &blocked, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd < 0) {
    std::fprintf(stderr, "horarun: signalfd: %s\n", std::strerror(errno));
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    return 1;
  }
  std::string error;
  // Every rank's local process announces its group (remote ranks: their rsh).
  // (Elastic mode: workers come and go; live ones, and stopped ones still in
  // their grace period, may together pass --max-np.)
  const size_t most =
      spec.elastic ? 2 * std::max<size_t>(spec.placements.size(),
                                          static_cast<size_t>(spec.elastic->settings.max_np)) +
                         16
                   : spec.placements.size();
  auto watcher = RankWatcher::Start(most, spec.stop_grace_s, &error);
  int exit_code = 1;
  if (!watcher) {
    std::fprintf(stderr, "horarun: %s\n", error.c_str());
  } else {
    job_internal::Job job(spec, sigfd, blocked, *watcher);
    job.Launch();
    job.Run();
    exit_code = job.exit_code();
    watcher.reset();  // the job is done: the watcher exits
  }
  close(sigfd);
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  return exit_code;
}

}  // namespace hora::horarun
