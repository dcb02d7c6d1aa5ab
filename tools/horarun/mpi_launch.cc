// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "mpi_launch.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "job.h"

namespace hora::horarun {

Result<MpiFlavour> MpiFlavourFromVersion(const std::string& mpirun,
                                         const std::string& version_text) {
  if (version_text.find("Open MPI") != std::string::npos ||
      version_text.find("OpenRTE") != std::string::npos) {
    return MpiFlavour::kOpenMpi;
  }
  if (version_text.find("HYDRA") != std::string::npos ||
      version_text.find("MPICH") != std::string::npos) {
    return MpiFlavour::kMpich;
  }
  std::string first = version_text.substr(0, version_text.find('\n'));
  return InvalidArgument("--mpirun '" + mpirun +
                         "': not OpenMPI's or MPICH's mpirun (its --version says '" + first +
                         "'); horarun --mpi supports those two");
}

Result<MpiFlavour> DetectMpirun(const std::string& mpirun) {
  int fds[2];
  if (pipe(fds) != 0) return UnavailableError(std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) return UnavailableError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_UNBLOCK, &all, nullptr);  // horarun's main() blocked some
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    execlp(mpirun.c_str(), mpirun.c_str(), "--version", static_cast<char*>(nullptr));
    std::fprintf(stderr, "exec failed: %s", std::strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR);) {
    if (n > 0) text.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return InvalidArgument("--mpirun '" + mpirun + "' cannot be started: " + text +
                           " (install OpenMPI or MPICH, or name one with --mpirun PATH)");
  }
  return MpiFlavourFromVersion(mpirun, text);
}

std::vector<std::string> MpirunCommand(const MpirunSpec& spec) {
  std::vector<std::string> argv = {spec.mpirun, "-np", std::to_string(spec.np)};
  std::string hosts;
  for (const HostSlots& h : spec.hosts) {
    hosts += (hosts.empty() ? "" : ",") + h.host + ":" + std::to_string(h.slots);
  }
  if (spec.flavour == MpiFlavour::kOpenMpi) {
    argv.insert(argv.end(), {"-H", hosts, "--bind-to", "none"});
    if (spec.as_root) argv.push_back("--allow-run-as-root");
    if (spec.prefix_output) argv.push_back("--tag-output");
    for (const std::string& name : spec.forward) argv.insert(argv.end(), {"-x", name});
  } else {
    argv.insert(argv.end(), {"-hosts", hosts});
    if (spec.prefix_output) argv.push_back("-prepend-rank");
    std::string list;
    for (const std::string& name : spec.forward) list += (list.empty() ? "" : ",") + name;
    if (!list.empty()) argv.insert(argv.end(), {"-genvlist", list});
  }
  argv.insert(argv.end(), spec.command.begin(), spec.command.end());
  return argv;
}

int RunMpirun(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env) {
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&mask, sig);
  sigprocmask(SIG_BLOCK, &mask, nullptr);  // already blocked by main(); kept for tests
  // Everything the child needs is built here: between fork and exec a child
  // of this multi-threaded process may only make async-signal-safe calls (a
  // malloc there can deadlock on a lock another thread held at fork time).
  const std::vector<std::string> envs = ChildEnvironment(env);
  std::vector<char*> cargv, cenv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const std::string& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "horarun: fork: %s\n", std::strerror(errno));
    return 1;
  }
  if (pid == 0) {
    sigprocmask(SIG_UNBLOCK, &mask, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // mpirun stops its ranks when horarun dies
    execvpe(cargv[0], cargv.data(), cenv.data());
    static constexpr char kMsg[] = "horarun: cannot start mpirun\n";
    (void)!write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    _exit(127);
  }
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return 128 + WTERMSIG(status);
    }
    siginfo_t info{};
    const int sig = sigwaitinfo(&mask, &info);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) kill(pid, sig);  // mpirun stops the ranks
  }
}

}  // namespace hora::horarun
