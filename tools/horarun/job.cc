// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "job.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "output.h"

extern char** environ;

namespace hora::horarun {
namespace {

using Clock = std::chrono::steady_clock;

struct Rank {
  Placement placement;
  pid_t pid = -1;
  bool running = false;
  int exit_code = 0;
  int fds[2] = {-1, -1};  // stdout, stderr read ends
  int stdin_fd = -1;      // remote ranks: the write end of their stdin
  std::unique_ptr<LineForwarder> forward[2];
};

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

// Forks and execs one rank. Returns false (after printing why) on failure.
// `input`, when set, is written to the rank's stdin, which stays open until
// the rank ends (remote ranks: the secret, and a line that tells them horarun
// is alive); without it the rank shares horarun's stdin.
bool Spawn(Rank& r, const std::vector<std::string>& argv, const std::vector<std::string>& envs,
           const sigset_t& blocked, const std::optional<std::string>& input) {
  int out[2], err[2], in[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
      (input && pipe2(in, O_CLOEXEC) != 0)) {
    std::fprintf(stderr, "horarun: pipe: %s\n", std::strerror(errno));
    return false;
  }
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "horarun: fork: %s\n", std::strerror(errno));
    return false;
  }
  if (pid == 0) {
    setpgid(0, 0);                        // its own group: we signal the whole tree
    prctl(PR_SET_PDEATHSIG, SIGKILL);     // horarun gone -> rank gone
    if (getppid() != parent) _exit(127);  // horarun died before prctl took effect
    sigprocmask(SIG_UNBLOCK, &blocked, nullptr);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    if (input) dup2(in[0], STDIN_FILENO);
    execvpe(cargv[0], cargv.data(), cenv.data());
    std::fprintf(stderr, "horarun: cannot run '%s': %s\n", cargv[0], std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);
  close(out[1]);
  close(err[1]);
  if (input) {
    close(in[0]);
    // A pipe holds 64 KiB: this small write never blocks. EPIPE (the rank
    // already gone) is seen as its exit.
    // SIGPIPE is held back around the write and a pending one discarded.
    const std::string line = *input + "\n";
    sigset_t pipe_signal, old_mask;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, &old_mask);
    if (write(in[1], line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      std::fprintf(stderr, "horarun: cannot pass the job secret to rank %d: %s\n", r.placement.rank,
                   std::strerror(errno));
      const timespec now{0, 0};
      (void)sigtimedwait(&pipe_signal, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    r.stdin_fd = in[1];
  }
  r.pid = pid;
  r.running = true;
  r.fds[0] = out[0];
  r.fds[1] = err[0];
  return true;
}

void SignalAll(std::vector<Rank>& ranks, int sig) {
  for (auto& r : ranks) {
    if (r.running) kill(-r.pid, sig);
  }
}

}  // namespace

// Builds the child's environment: ours, then the job's, then the rank's.
std::vector<std::string> ChildEnvironment(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) merged[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  for (const auto& [k, v] : extra) merged[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : merged) out.push_back(k + "=" + v);
  return out;
}

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

static std::string RemoteScript(const std::string& cwd,
                                const std::map<std::string, std::string>& env,
                                const std::vector<std::string>& argv, double grace_s) {
  // The secret comes first on stdin, so that no command line (ps) shows it.
  // The rank runs in the background, in a session of its own where setsid
  // exists, with stdin from /dev/null (as a background job of sh it starts
  // with SIGINT and SIGQUIT ignored; horarun stops ranks with TERM). A TERM,
  // INT or HUP to this shell is
  // passed on to the rank's group (also one that came before the rank
  // started). A watcher, in a session of its own so that signals meant for
  // this shell's group do not end it, stops the rank's group when horarun's
  // end of stdin closes (horarun stopping the job, gone, or its ssh gone):
  // TERM, then KILL after the grace period.
  std::string cmd = "env";
  for (const auto& [k, v] : env) {
    if (k != "HORA_SECRET") cmd += " " + ShellQuote(k + "=" + v);
  }
  for (const auto& a : argv) cmd += " " + ShellQuote(a);
  char grace[32];
  std::snprintf(grace, sizeof grace, "%d", static_cast<int>(grace_s + 0.999));
  return std::string(
             "IFS= read -r HORA_SECRET || { echo 'horarun: no job secret on stdin (the remote "
             "shell must pass stdin on: no ssh -n)' >&2; exit 1; }; export HORA_SECRET; cd ") +
         ShellQuote(cwd) +
         " || exit 1; p=; g=; stopped=; "
         "stop() { stopped=1; [ -n \"$p\" ] && { kill -TERM $g 2>/dev/null || kill -TERM $p "
         "2>/dev/null; }; }; trap stop TERM INT HUP; "
         "s=; command -v setsid >/dev/null 2>&1 && s=setsid; exec 3<&0; $s " +
         cmd +
         " </dev/null 3<&- & p=$!; g=$p; [ -n \"$s\" ] && g=-$p; [ -n \"$stopped\" ] && stop; "
         "$s sh -c 'cat >/dev/null; kill -TERM $0 2>/dev/null || exit 0; sleep $1; "
         "kill -KILL $0 2>/dev/null' \"$g\" " +
         grace +
         " <&3 >/dev/null 2>&1 & w=$!; exec 3<&-; "
         "while :; do wait $p; rc=$?; kill -0 $p 2>/dev/null || break; done; "
         "kill $w 2>/dev/null; exit $rc";
}

std::vector<std::string> RshCommand(const std::vector<std::string>& rsh, const std::string& host,
                                    const std::string& script) {
  std::vector<std::string> out = rsh;
  out.push_back(host);
  if (rsh.front() == "ssh") {
    // ssh hands one string to the remote user's login shell, whatever it is.
    out.push_back("sh -c " + ShellQuote(script));
  } else {  // a local wrapper (ip netns exec) runs argv directly
    out.push_back("sh");
    out.push_back("-c");
    out.push_back(script);
  }
  return out;
}

std::vector<std::string> RemoteCommand(const std::vector<std::string>& rsh, const std::string& host,
                                       const std::string& cwd,
                                       const std::map<std::string, std::string>& env,
                                       const std::vector<std::string>& argv, double grace_s) {
  return RshCommand(rsh, host, RemoteScript(cwd, env, argv, grace_s));
}

std::map<std::string, std::string> RankEnvironment(const Placement& p, int size) {
  return {{"HORA_RANK", std::to_string(p.rank)},
          {"HORA_SIZE", std::to_string(size)},
          {"HORA_LOCAL_RANK", std::to_string(p.local_rank)},
          {"HORA_LOCAL_SIZE", std::to_string(p.local_size)},
          {"HORA_CROSS_RANK", std::to_string(p.cross_rank)},
          {"HORA_CROSS_SIZE", std::to_string(p.cross_size)},
          {"HORA_HOSTNAME", p.host}};
}

int RunJob(const JobSpec& spec) {
  const int size = static_cast<int>(spec.placements.size());
  sigset_t blocked;
  sigemptyset(&blocked);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&blocked, s);
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
  char cwd_buf[4096];
  const std::string cwd = getcwd(cwd_buf, sizeof cwd_buf) ? cwd_buf : ".";

  std::vector<Rank> ranks(static_cast<size_t>(size));
  int exit_code = 0;
  // Stopping: a failed rank first gives the others a moment to notice the
  // lost peer and report it themselves (term_at), then they get SIGTERM, and
  // SIGKILL after the grace period (kill_at). A signal to horarun skips the
  // first step.
  bool stopping = false, termed = false;
  Clock::time_point term_at{}, kill_at{};
  auto seconds = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  auto begin_stop = [&](int code, bool at_once) {
    if (stopping) return;
    stopping = true;
    exit_code = code;
    term_at =
        Clock::now() + (at_once ? Clock::duration{} : seconds(std::min(3.0, spec.stop_grace_s)));
    kill_at = term_at + seconds(spec.stop_grace_s);
  };

  for (int i = 0; i < size && !stopping; ++i) {
    Rank& r = ranks[static_cast<size_t>(i)];
    r.placement = spec.placements[static_cast<size_t>(i)];
    std::map<std::string, std::string> env = spec.env;
    for (const auto& [k, v] : RankEnvironment(r.placement, size)) env[k] = v;
    std::vector<std::string> argv = spec.command;
    std::vector<std::string> envs;
    std::optional<std::string> input;
    if (IsLocalHost(r.placement.host)) {
      envs = ChildEnvironment(env);
    } else {
      argv = RemoteCommand(spec.rsh, r.placement.host, cwd, env, spec.command, spec.stop_grace_s);
      envs = ChildEnvironment({});
      auto secret = env.find("HORA_SECRET");
      input = secret == env.end() ? "" : secret->second;
    }
    for (int s = 0; s < 2; ++s) {
      r.forward[s] = std::make_unique<LineForwarder>(i, s == 0 ? STDOUT_FILENO : STDERR_FILENO,
                                                     spec.prefix_output);
    }
    if (!Spawn(r, argv, envs, blocked, input)) begin_stop(1, true);
  }

  Clock::time_point all_exited{};
  while (true) {
    bool any_open = false, any_running = false;
    std::vector<pollfd> pfds = {{sigfd, POLLIN, 0}};
    std::vector<std::pair<size_t, int>> owners;
    for (size_t i = 0; i < ranks.size(); ++i) {
      any_running = any_running || ranks[i].running;
      for (int s = 0; s < 2; ++s) {
        if (ranks[i].fds[s] >= 0) {
          pfds.push_back({ranks[i].fds[s], POLLIN, 0});
          owners.push_back({i, s});
          any_open = true;
        }
      }
    }
    if (!any_running && !any_open) break;
    if (!any_running) {
      // A rank's own children may hold its pipes open: drain briefly, then go.
      if (all_exited == Clock::time_point{}) all_exited = Clock::now();
      if (Clock::now() - all_exited > std::chrono::seconds(2)) {
        for (auto& r : ranks) {
          for (int s = 0; s < 2; ++s) {
            if (r.fds[s] >= 0) {
              r.forward[s]->Flush();
              close(r.fds[s]);
              r.fds[s] = -1;
            }
          }
        }
        break;
      }
    }
    int timeout_ms = 200;
    if (stopping && any_running) {
      const auto now = Clock::now();
      if (!termed && now >= term_at) {
        SignalAll(ranks, SIGTERM);
        // Remote ranks: closing their stdin starts their watcher's TERM and
        // KILL on their host (our signals reach only the local rsh).
        for (auto& r : ranks) {
          if (r.stdin_fd >= 0) close(std::exchange(r.stdin_fd, -1));
        }
        termed = true;
      }
      if (now >= kill_at) SignalAll(ranks, SIGKILL);
    }
    if (poll(pfds.data(), pfds.size(), timeout_ms) < 0 && errno != EINTR) break;
    if (pfds[0].revents & POLLIN) {
      signalfd_siginfo info;
      while (read(sigfd, &info, sizeof info) == sizeof info) {
        if (info.ssi_signo != SIGCHLD) {
          std::fprintf(stderr, "horarun: got signal %u (%s); stopping all ranks\n", info.ssi_signo,
                       strsignal(static_cast<int>(info.ssi_signo)));
          begin_stop(128 + static_cast<int>(info.ssi_signo), true);
        }
      }
    }
    for (size_t k = 1; k < pfds.size(); ++k) {
      if (!(pfds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Rank& r = ranks[owners[k - 1].first];
      const int s = owners[k - 1].second;
      char buf[65536];
      ssize_t n = read(r.fds[s], buf, sizeof buf);
      if (n > 0) {
        r.forward[s]->Feed(buf, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        r.forward[s]->Flush();
        close(r.fds[s]);
        r.fds[s] = -1;
      }
    }
    int status = 0;
    for (pid_t pid; (pid = waitpid(-1, &status, WNOHANG)) > 0;) {
      for (auto& r : ranks) {
        if (r.pid != pid) continue;
        r.running = false;
        r.exit_code = ExitCodeOf(status);
        if (r.stdin_fd >= 0) close(std::exchange(r.stdin_fd, -1));
        if (r.exit_code != 0 && !termed) {  // not one we stopped ourselves
          std::fprintf(stderr, "horarun: rank %d (pid %d on %s) %s%s\n", r.placement.rank, pid,
                       r.placement.host.c_str(), DescribeExit(status).c_str(),
                       stopping ? "" : "; stopping the other ranks");
          begin_stop(r.exit_code, false);
        }
      }
    }
  }
  close(sigfd);
  for (auto& r : ranks) {
    if (r.stdin_fd >= 0) close(std::exchange(r.stdin_fd, -1));
  }
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  return exit_code;
}

}  // namespace hora::horarun
