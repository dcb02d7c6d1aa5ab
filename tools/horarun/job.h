// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// Runs one job: starts every rank (fork/exec locally, ssh for other hosts),
// forwards their output line by line, and watches them. Each rank runs in a
// process group of its own, which is ended when the rank ends (also after a
// success): SIGTERM, then SIGKILL after the grace period, so that what a
// rank started in the background does not outlive it. When a rank fails
// (non-zero exit or a signal), or horarun gets SIGINT/SIGTERM/SIGHUP, every
// other rank's group gets SIGTERM, then SIGKILL after the grace period;
// horarun's exit code is that of the rank that failed first (128 + signal
// for a signal; death_watch.h says how "first" is known). If horarun itself
// dies, even by SIGKILL, a watcher process stops the local ranks' groups
// (watcher.h), and each remote rank's own watcher stops it.
#pragma once

#include <signal.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "elastic_planner.h"
#include "hosts.h"

namespace hora::horarun {

struct JobSpec {
  std::vector<Placement> placements;
  std::vector<std::string> command;
  // Variables every rank gets (store address, secret, job id, settings);
  // horarun adds HORA_RANK, HORA_SIZE, HORA_LOCAL_*, HORA_CROSS_* per rank.
  std::map<std::string, std::string> env;
  // What ranks on other hosts get besides `env` (under it): horarun's
  // environment as ForwardedEnvironment (environment.h) leaves it. Local
  // ranks inherit horarun's own.
  std::map<std::string, std::string> remote_env;
  bool prefix_output = true;
  // Each rank's output also goes to output_dir/rank.N/{stdout,stderr}
  // (RankOutputDir, output.h) when set; the folders exist already.
  std::string output_dir;
  double stop_grace_s = 5;
  // Ranks on other hosts must have read their input (the secret and the
  // environment) within this (HORA_START_TIMEOUT_S), or the job stops,
  // naming the host. Their inputs are written as their remote shells read
  // them: a slow host holds up no other rank's start.
  double start_timeout_s = 120;
  std::vector<std::string> rsh = {"ssh"};  // remote start: rsh... host 'command line'
  // horarun's store on this host (0: none), where a failing rank says so
  // before it tears down (launch/failure_report.h): horarun names the rank
  // whose report came first.
  uint16_t store_port = 0;
  // Elastic mode (docs/dev/elastic.md): each placement starts a worker
  // (HORA_WORKER_ID, no rank variables), which finds its rank in the store
  // at each init(); a worker that fails leaves the job, which goes on
  // while the planner finds enough workers. horarun's exit code: 0 once a
  // worker ends with 0 (the job is done: nothing more is planned), else
  // the last failure's, or 1 when the planner ends the job.
  struct Elastic {
    ElasticPlanner::Settings settings;
    uint16_t store_port = 0;  // horarun's store, on this host
    // --host-discovery-script (host_discovery.h): run every second; its
    // hosts' slots get workers (up to max_np live), and the workers of
    // slots it no longer names are stopped. Each change adds 1 to the
    // store's hosts-added or hosts-removed counter (launch/elastic_place.h).
    std::string discovery_script;
    int slots_per_host = 0;
    // A host where a worker failed gets no new worker for cooldown_s.first
    // seconds, doubled at each failure there, at most cooldown_s.second;
    // {0, 0}: never again (Horovod's blacklist without a cooldown).
    std::pair<double, double> cooldown_s{0, 0};
    bool store_on_loopback = false;  // workers on other hosts cannot reach it
  };
  std::optional<Elastic> elastic;
};

// An elastic worker's id: its host and the index of its placement.
std::string WorkerId(const Placement& p);

// The signals RunJob handles (SIGINT, SIGTERM, SIGHUP, SIGCHLD). Block them
// in every thread before the first thread starts, so that they reach
// RunJob's signalfd and are never taken, and lost, by another thread.
sigset_t JobSignals();

// Returns horarun's exit code. Launch errors are printed to stderr.
int RunJob(const JobSpec& spec);

// The environment a child process gets: horarun's own, overridden by extra
// ("NAME=value" strings, built before fork: the child only calls exec).
std::vector<std::string> ChildEnvironment(const std::map<std::string, std::string>& extra);

// The per-rank variables horarun sets (exposed for tests).
std::map<std::string, std::string> RankEnvironment(const Placement& p, int size);

// How the rank placed at `p` starts: on this host, the job's command with
// the job's and the rank's variables; on another, the remote shell's
// command line (RemoteCommand), whose stdin gets `input` (RemoteInput: the
// secret and every variable, remote_env under env under the rank's).
struct RankLaunch {
  std::vector<std::string> argv;
  std::vector<std::string> envs;  // "NAME=value"
  std::optional<std::string> input;
};
// An elastic worker's place in the world it would join if every live worker
// came (ElasticPlanner::Prospect), exported at its start as horovodrun's
// elastic driver does (HOROVOD_RANK, HOROVOD_LOCAL_RANK, ...: scripts that
// pick a device before init()); init() rewrites them with the world's.
struct ProspectivePlace {
  Placement placement;
  int size = 0;
};
RankLaunch PlanRankLaunch(const JobSpec& spec, const Placement& p, const std::string& cwd,
                          const std::optional<ProspectivePlace>& prospect = std::nullopt);

// The command line that starts `argv` on a remote host through `rsh` (e.g.
// ssh with its options, or "ip netns exec" for test hosts), in `cwd`. The
// command reads RemoteInput from its stdin first; the rank is stopped
// (TERM, then KILL after grace_s) when that stdin closes.
std::vector<std::string> RemoteCommand(const std::vector<std::string>& rsh, const std::string& host,
                                       const std::string& cwd, const std::vector<std::string>& argv,
                                       double grace_s);

// What a remote rank's command reads from its stdin before the rank starts:
// the secret on a line, then one line per variable of `env` (but
// HORA_SECRET), "r NAME=VALUE", or for a value with newlines "e NAME=" and
// the value with newline, backslash and percent as printf's octal escapes;
// then an empty line. No command line shows any of it.
std::string RemoteInput(const std::string& secret, const std::map<std::string, std::string>& env);

// The line a remote rank's shell writes to its stderr once it has read its
// input (RemoteCommand): horarun takes it out of the rank's output and
// counts the rank as started (one that has not by the start timeout stops
// the job, naming its host: its pipe may hold the input unread).
inline constexpr const char* kRemoteStartedLine = "\033[0mhorarun: remote shell started";

// `script` run by sh on `host` through `rsh` (ssh: one quoted string for the
// remote login shell; a local wrapper: sh -c script).
std::vector<std::string> RshCommand(const std::vector<std::string>& rsh, const std::string& host,
                                    const std::string& script);

// Quotes `s` for a POSIX shell ('...' with embedded quotes escaped).
std::string ShellQuote(const std::string& s);

}  // namespace hora::horarun
