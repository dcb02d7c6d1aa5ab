// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// horarun: starts a Hora job. See options.h for the command line and job.h
// for how ranks are started, watched and stopped.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "build_info.h"
#include "common/config.h"
#include "common/environment.h"
#include "common/horovod_env.h"
#include "common/logging.h"
#include "environment.h"
#include "host_discovery.h"
#include "job.h"
#include "launch/launcher_identity.h"
#include "mpi_launch.h"
#include "net/auth.h"
#include "options.h"
#include "output_files.h"
#include "program_check.h"
#include "remote_cleanup.h"
#include "store/tcp_store_server.h"
#include "transport/shm/shm_segment.h"
#include "transport/tcp/tcp_mesh.h"

namespace {

// SIGPIPE's handler: none of its own. horarun's stdout or stderr may be a
// pipe whose reader is gone (`horarun ... | head`, a log shipper
// restarting); the write then fails with EPIPE, the line is dropped and the
// job goes on, instead of horarun dying by the signal and taking every
// rank with it. (A handler, not SIG_IGN: exec resets a handled signal, so
// the ranks and every program horarun starts get the default back.)
void IgnorePipeSignal(int) {}

// Random hex digits for the job secret and id (net/auth.h); exits on failure.
std::string RandomHex(size_t bytes) {
  auto hex = hora::net::RandomHex(bytes);
  if (!hex.ok()) {
    std::fprintf(stderr, "horarun: cannot get random bytes for the job secret\n");
    std::exit(1);
  }
  return *hex;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hora;
  // The signals horarun handles are blocked before any thread starts (the
  // rendezvous server's), so that they reach the thread that waits for them
  // and are never taken, and lost, by another.
  struct sigaction on_pipe = {};
  on_pipe.sa_handler = IgnorePipeSignal;
  sigemptyset(&on_pipe.sa_mask);
  sigaction(SIGPIPE, &on_pipe, nullptr);
  const sigset_t job_signals = horarun::JobSignals();
  pthread_sigmask(SIG_BLOCK, &job_signals, nullptr);
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = horarun::ParseOptions(args, &horarun::ReadWholeFile);
  if (!parsed.ok()) {
    std::fprintf(stderr, "horarun: %s\n(horarun --help lists the flags)\n",
                 parsed.status().message().c_str());
    return 2;
  }
  const horarun::Options& opts = *parsed;
  for (const std::string& notice : opts.notices)
    std::fprintf(stderr, "horarun: %s\n", notice.c_str());
  if (opts.help) {
    std::fputs(horarun::Usage().c_str(), stdout);
    return 0;
  }
  if (opts.version) {
    std::fputs(horarun::VersionText().c_str(), stdout);
    return 0;
  }
  if (opts.check_build) {
    std::fputs(horarun::CheckBuildText().c_str(), stdout);
    return 0;
  }
  const auto whole_env = ReadWholeEnvironment();
  auto env = ReadProcessEnvironment();
  // A Horovod user's HOROVOD_* settings, under the HORA_* ones: the ranks
  // read them the same way (rank 0 says how); horarun checks them here first.
  HorovodSettings horovod = ReadHorovodSettings(whole_env, env);
  for (const auto& [k, v] : horovod.hora) env.emplace(k, v);
  // The flags' and the config file's settings win over the environment's.
  for (const auto& [k, v] : opts.settings) {
    env[k] = v;
    horovod.from.erase(k);
  }
  if (opts.print_config) {
    auto config = ConfigFromEnv(env);
    if (!config.ok()) {
      std::fprintf(stderr, "horarun: %s\n",
                   InHorovodsNames(config.status(), horovod).message().c_str());
      return 2;
    }
    std::fputs((horarun::BuildComment() + FormatConfig(*config)).c_str(), stdout);
    return 0;
  }
  // Validate the job's settings before anything starts.
  auto config = ConfigFromEnv(env);
  if (!config.ok()) {
    std::fprintf(stderr, "horarun: %s\n",
                 InHorovodsNames(config.status(), horovod).message().c_str());
    return 2;
  }
  std::optional<horarun::MpiFlavour> flavour;
  if (opts.mpi) {
    auto detected = horarun::DetectMpirun(opts.mpirun);
    if (!detected.ok()) {
      std::fprintf(stderr, "horarun: %s\n", detected.status().message().c_str());
      return 2;
    }
    flavour = *detected;
  }
  std::vector<horarun::HostSlots> hosts = opts.hosts;
  if (!opts.discovery_script.empty()) {
    // The first answer places the first workers: -np of them, or as many as
    // its slots hold.
    auto output = horarun::RunDiscoveryScript(opts.discovery_script, std::chrono::seconds(30));
    auto found = output.ok() ? horarun::ParseDiscoveredHosts(*output, opts.slots_per_host)
                             : Result<std::vector<horarun::HostSlots>>(output.status());
    if (!found.ok()) {
      std::fprintf(stderr, "horarun: --host-discovery-script: %s\n",
                   found.status().message().c_str());
      return 2;
    }
    int slots = 0;
    for (const auto& h : *found) slots += h.slots;
    if (slots == 0) {
      std::fprintf(stderr, "horarun: --host-discovery-script '%s' names no host\n",
                   opts.discovery_script.c_str());
      return 2;
    }
    hosts = *found;
  }
  int start_np = opts.np;
  if (!opts.discovery_script.empty()) {
    int slots = 0;
    for (const auto& h : hosts) slots += h.slots;
    start_np = std::min(opts.np, slots);
  }
  auto placements = horarun::PlaceRanks(start_np, hosts);
  if (!placements.ok()) {
    std::fprintf(stderr, "horarun: %s\n", placements.status().message().c_str());
    return 2;
  }
  bool all_local = true, any_local = false;
  for (const auto& p : *placements) {
    all_local = all_local && horarun::IsLocalHost(p.host);
    any_local = any_local || horarun::IsLocalHost(p.host);
  }
  // Ranks on this host must find the interface --network-interface names
  // for their TCP connections, whatever their transport turns out to be (a
  // typo in a one-host job would go unseen until the job spans hosts). (A
  // HORA_IFACE from the environment, exported for a whole cluster, is
  // looked up only where it is used.)
  if (any_local && !opts.nics.empty()) {
    auto addr = AdvertisedAddress(opts.nics.front());
    if (!addr.ok()) {
      std::fprintf(stderr, "horarun: --network-interface: %s\n", addr.status().message().c_str());
      return 2;
    }
  }
  // Ranks on this host must be able to start the program.
  if (any_local) {
    auto path = whole_env.find("PATH");
    Status st = horarun::CheckProgram(opts.command.front(),
                                      path == whole_env.end() ? "/usr/bin:/bin" : path->second);
    if (!st.ok()) {
      std::fprintf(stderr, "horarun: %s\n", st.message().c_str());
      return 2;
    }
  }
  auto exported = horarun::ExportedVariables(opts.exports, whole_env);
  if (!exported.ok()) {
    std::fprintf(stderr, "horarun: %s\n", exported.status().message().c_str());
    return 2;
  }
  if (!opts.output_dir.empty()) {
    if (opts.mpi) {
      std::fprintf(stderr, "horarun: --output-filename is not supported with --mpi yet\n");
      return 2;
    }
    Status st = horarun::MakeOutputDirs(opts.output_dir, opts.np);
    if (!st.ok()) {
      std::fprintf(stderr, "horarun: %s\n", st.message().c_str());
      return 2;
    }
  }

  const std::string secret = env.count("HORA_SECRET") ? env["HORA_SECRET"] : RandomHex(32);
  Logger logger(LogLevel::kWarning, -1);
  std::string bind = opts.bind;
  if (bind.empty() && all_local) bind = "127.0.0.1";
  if (bind.empty()) {
    auto addr = AdvertisedAddress(env.count("HORA_IFACE") ? env["HORA_IFACE"] : "");
    if (!addr.ok()) {
      std::fprintf(stderr, "horarun: %s\n", addr.status().message().c_str());
      return 2;
    }
    bind = *addr;
  }
  // (Every rank on this host: the store listens on loopback only, unless
  // --bind names an address for hosts that come later.)
  const bool loopback = all_local && opts.bind.empty();
  auto server = TcpStoreServer::Start(loopback ? "127.0.0.1" : "", 0, secret, logger);
  if (!server.ok()) {
    std::fprintf(stderr, "horarun: cannot start the rendezvous server: %s\n",
                 server.status().message().c_str());
    return 1;
  }

  horarun::JobSpec spec;
  spec.placements = *placements;
  spec.command = opts.command;
  spec.prefix_output = opts.prefix_output;
  spec.stop_grace_s = opts.stop_grace_s;
  spec.start_timeout_s = config->start_timeout_s;
  spec.env = env;
  for (const auto& [k, v] : *exported) spec.env[k] = v;
  spec.remote_env = horarun::ForwardedEnvironment(whole_env);
  spec.output_dir = opts.output_dir;
  spec.env["HORA_SECRET"] = secret;
  spec.env["HORA_JOB_ID"] = RandomHex(6);
  spec.store_port = (*server)->port();
  // (Each rank on this host watches horarun: api/launcher_watch.h.)
  spec.env["HORA_LAUNCHER"] = LauncherIdentity();
  const bool v6 = bind.find(':') != std::string::npos;
  spec.env["HORA_STORE_ADDR"] =
      (v6 ? "[" + bind + "]" : bind) + ":" + std::to_string((*server)->port());
  spec.rsh = opts.rsh;
  if (opts.elastic()) {
    horarun::JobSpec::Elastic elastic;
    elastic.settings.min_np = opts.min_np;
    elastic.settings.max_np = opts.max_np;
    elastic.settings.timeout = std::chrono::duration_cast<horarun::ElasticPlanner::Clock::duration>(
        std::chrono::duration<double>(config->elastic_timeout_s));
    elastic.settings.reset_limit = opts.reset_limit;
    elastic.settings.can_grow = !opts.discovery_script.empty();
    elastic.store_port = (*server)->port();
    elastic.discovery_script = opts.discovery_script;
    elastic.slots_per_host = opts.slots_per_host;
    elastic.cooldown_s = opts.blacklist_cooldown_s;
    elastic.store_on_loopback = loopback;
    spec.elastic = elastic;
  }
  if (opts.verbose) {
    for (const auto& [k, v] : spec.env) {
      if (k != "HORA_SECRET")
        std::fprintf(stderr, "horarun: every rank gets %s=%s\n", k.c_str(), v.c_str());
    }
    for (const auto& p : *placements) {
      std::fprintf(stderr, "horarun: rank %d on %s (local rank %d of %d)%s\n", p.rank,
                   p.host.c_str(), p.local_rank, p.local_size,
                   horarun::IsLocalHost(p.host) ? "" : ", through the remote shell");
    }
  }
  int rc;
  if (flavour) {
    // mpirun starts the ranks; they find the layout in its variables and
    // the store here.
    spec.env["HORA_STORE_SERVER"] = "horarun";
    horarun::MpirunSpec mpi;
    mpi.mpirun = opts.mpirun;
    mpi.flavour = *flavour;
    mpi.np = opts.np;
    mpi.hosts = opts.hosts;
    mpi.prefix_output = opts.prefix_output;
    mpi.as_root = geteuid() == 0;
    mpi.command = opts.command;
    // The job's variables, and (as horovodrun's -x list) horarun's
    // environment as ranks on other hosts get it.
    for (const auto& [name, value] : spec.env) mpi.forward.push_back(name);
    for (const auto& [name, value] : spec.remote_env) {
      if (spec.env.count(name) == 0) mpi.forward.push_back(name);
    }
    rc = horarun::RunMpirun(horarun::MpirunCommand(mpi), spec.env);
  } else {
    rc = horarun::RunJob(spec);
  }
  // Ranks unlink their shared-memory segments as soon as every peer mapped
  // them; a crash before that point leaves some behind, removed here (and,
  // after a failure, on the other hosts through the remote shell).
  const std::string& job_id = spec.env["HORA_JOB_ID"];
  (void)RemoveShmSegments(job_id);
  // And what jobs killed before left on this host (their creators gone),
  // whatever transport this job used.
  (void)RemoveDeadShmSegments();
  if (rc != 0 && !flavour && !all_local) {
    std::vector<std::string> remote;
    for (const auto& p : *placements) {
      if (!horarun::IsLocalHost(p.host) &&
          std::find(remote.begin(), remote.end(), p.host) == remote.end()) {
        remote.push_back(p.host);
      }
    }
    // (A host that never answered, ssh hung, takes the whole bound: said first.)
    constexpr int kCleanupS = 10;
    std::fprintf(stderr,
                 "horarun: removing what the job left in shared memory on %zu other host(s) "
                 "through the remote shell (at most %d s)\n",
                 remote.size(), kCleanupS);
    const int failed = horarun::RemoveRemoteShmSegments(opts.rsh, remote, job_id, kCleanupS);
    if (failed > 0) {
      std::fprintf(stderr,
                   "horarun: could not confirm the removal of job %s's shared memory on %d "
                   "host(s) (/dev/shm/hora-%s-*)\n",
                   job_id.c_str(), failed, job_id.c_str());
    }
  }
  return rc;
}
