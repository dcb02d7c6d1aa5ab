// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "job.h"

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>

extern char** environ;

namespace hora::horarun {

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

static bool IsShellName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

static std::string RemoteScript(const std::string& cwd, const std::vector<std::string>& argv,
                                double grace_s) {
  // Its stdin first brings the secret, then the rank's variables up to an
  // empty line (RemoteInput), so that no command line (ps) shows them.
  // The rank runs in the background, in a session of its own where setsid
  // exists, with stdin from /dev/null (as a background job of sh it starts
  // with SIGINT and SIGQUIT ignored; horarun stops ranks with TERM). A TERM,
  // INT or HUP to this shell is
  // passed on to the rank's group (also one that came before the rank
  // started). A watcher, in a session of its own so that signals meant for
  // this shell's group do not end it, stops the rank's group when horarun's
  // end of stdin closes (horarun stopping the job, gone, or its ssh gone):
  // TERM (with CONT, for a rank frozen with SIGSTOP), then KILL after the
  // grace period. Once the rank has ended, the watcher's group ends too
  // (its sleep of the grace period with it).
  std::string cmd = "env";
  for (const auto& a : argv) cmd += " " + ShellQuote(a);
  char grace[32];
  std::snprintf(grace, sizeof grace, "%d", static_cast<int>(grace_s + 0.999));
  // Its own variables and function all start with __hora_ (RemoteInput
  // passes no such name): a user's variable of the same name (n, p, rc)
  // would otherwise be overwritten in the rank's environment.
  return std::string(
             "IFS= read -r HORA_SECRET || { echo 'horarun: no job secret on stdin (the remote "
             "shell must pass stdin on: no ssh -n)' >&2; exit 1; }; export HORA_SECRET; "
             "while IFS= read -r __hora_l && [ -n \"$__hora_l\" ]; do "
             "__hora_n=${__hora_l#? }; __hora_v=${__hora_n#*=}; __hora_n=${__hora_n%%=*}; "
             "case $__hora_l in e*) __hora_v=$(printf -- \"${__hora_v}x\"); "
             "__hora_v=${__hora_v%x};; esac; export \"$__hora_n=$__hora_v\"; done; "
             "printf '\\033[0mhorarun: remote shell started\\n' >&2; "  // (kRemoteStartedLine)
             "cd ") +
         ShellQuote(cwd) +
         " || exit 1; __hora_p=; __hora_g=; __hora_stopped=; "
         "__hora_stop() { __hora_stopped=1; [ -n \"$__hora_p\" ] && { kill -TERM $__hora_g "
         "2>/dev/null || kill -TERM $__hora_p 2>/dev/null; kill -CONT $__hora_g 2>/dev/null || "
         "kill -CONT $__hora_p 2>/dev/null; }; }; "
         "trap __hora_stop TERM INT HUP; "
         "__hora_s=; command -v setsid >/dev/null 2>&1 && __hora_s=setsid; exec 3<&0; $__hora_s " +
         cmd +
         " </dev/null 3<&- & __hora_p=$!; __hora_g=$__hora_p; [ -n \"$__hora_s\" ] && "
         "__hora_g=-$__hora_p; [ -n \"$__hora_stopped\" ] && __hora_stop; "
         "$__hora_s sh -c 'cat >/dev/null; kill -TERM $0 2>/dev/null || exit 0; kill -CONT $0; "
         "sleep $1; kill -KILL $0 2>/dev/null' \"$__hora_g\" " +
         grace +
         " <&3 >/dev/null 2>&1 & __hora_w=$!; exec 3<&-; "
         "while :; do wait $__hora_p; __hora_rc=$?; kill -0 $__hora_p 2>/dev/null || break; "
         "done; kill -TERM -$__hora_w 2>/dev/null || kill $__hora_w 2>/dev/null; exit $__hora_rc";
}

std::string RemoteInput(const std::string& secret, const std::map<std::string, std::string>& env) {
  std::string in = secret + "\n";
  for (const auto& [name, value] : env) {
    // A name the remote shell cannot export would end it.
    if (name == "HORA_SECRET" || !IsShellName(name) || name.rfind("__hora_", 0) == 0) continue;
    if (value.find('\n') == std::string::npos) {  // read -r takes it as it is
      in += "r " + name + "=" + value + "\n";
      continue;
    }
    // printf's format: octal escapes for the newline and its own \ and %.
    in += "e " + name + "=";
    for (char c : value) {
      in += c == '\n' ? "\\012" : c == '\\' ? "\\134" : c == '%' ? "\\045" : std::string(1, c);
    }
    in += "\n";
  }
  return in + "\n";
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
                                       const std::string& cwd, const std::vector<std::string>& argv,
                                       double grace_s) {
  return RshCommand(rsh, host, RemoteScript(cwd, argv, grace_s));
}

std::string WorkerId(const Placement& p) { return p.host + "/" + std::to_string(p.rank); }

std::map<std::string, std::string> RankEnvironment(const Placement& p, int size) {
  std::map<std::string, std::string> env = {{"RANK", std::to_string(p.rank)},
                                            {"SIZE", std::to_string(size)},
                                            {"LOCAL_RANK", std::to_string(p.local_rank)},
                                            {"LOCAL_SIZE", std::to_string(p.local_size)},
                                            {"CROSS_RANK", std::to_string(p.cross_rank)},
                                            {"CROSS_SIZE", std::to_string(p.cross_size)},
                                            {"HOSTNAME", p.host}};
  // Each as HORA_* and, for Horovod's scripts and tools, as horovodrun
  // exports it: HOROVOD_*.
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : env) {
    out["HORA_" + k] = v;
    out["HOROVOD_" + k] = v;
  }
  return out;
}

RankLaunch PlanRankLaunch(const JobSpec& spec, const Placement& p, const std::string& cwd,
                          const std::optional<ProspectivePlace>& prospect) {
  std::map<std::string, std::string> env = spec.env;
  if (spec.elastic) {
    if (prospect) {
      for (const auto& [k, v] : RankEnvironment(prospect->placement, prospect->size)) env[k] = v;
    }
    env["HORA_WORKER_ID"] = WorkerId(p);
    // (Its host as horarun names it, which the planner's local ranks follow.)
    env["HORA_HOSTNAME"] = p.host;
    env["HOROVOD_HOSTNAME"] = p.host;
    env["HOROVOD_ELASTIC"] = "1";  // (as horovodrun's elastic mode sets it)
    // (Where the user's setting gave it, as they wrote it: a rank that
    // sees HOROVOD_ELASTIC_TIMEOUT too finds it taken, not overruled.)
    env.emplace(
        "HORA_ELASTIC_TIMEOUT_S",
        std::to_string(std::chrono::duration<double>(spec.elastic->settings.timeout).count()));
  } else {
    for (const auto& [k, v] : RankEnvironment(p, static_cast<int>(spec.placements.size()))) {
      env[k] = v;
    }
  }
  RankLaunch launch;
  if (IsLocalHost(p.host)) {
    launch.argv = spec.command;
    launch.envs = ChildEnvironment(env);
  } else {
    // Forwarded from here, under the job's and the rank's own.
    std::map<std::string, std::string> remote = spec.remote_env;
    for (const auto& [k, v] : env) remote[k] = v;
    launch.argv = RemoteCommand(spec.rsh, p.host, cwd, spec.command, spec.stop_grace_s);
    launch.envs = ChildEnvironment({});
    auto secret = env.find("HORA_SECRET");
    launch.input = RemoteInput(secret == env.end() ? "" : secret->second, remote);
  }
  return launch;
}

}  // namespace hora::horarun
