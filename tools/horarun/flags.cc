// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "flags.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "common/config.h"
#include "options.h"

namespace hora::horarun {
namespace {

using Apply = Status (*)(Options&, const std::string&, const std::string&);

Status Bad(const std::string& flag, const std::string& value, const std::string& why) {
  return InvalidArgument(flag + " '" + value + "' " + why);
}

// A whole number in [min, max].
Result<long long> Whole(const std::string& flag, const std::string& v, long long min, long long max,
                        const std::string& why) {
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || errno != 0 || *end != '\0' || n < min || n > max) return Bad(flag, v, why);
  return n;
}

// A finite number, 0 or more.
Status NonNegative(const std::string& flag, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || errno != 0 || *end != '\0' || !std::isfinite(x) || x < 0) {
    return Bad(flag, v, "is not a number, 0 or more");
  }
  return Status::Ok();
}

Result<double> PositiveSeconds(const std::string& flag, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const double secs = std::strtod(v.c_str(), &end);
  if (v.empty() || errno != 0 || *end != '\0' || !std::isfinite(secs) || secs <= 0 || secs > 1e8) {
    return Bad(flag, v, "is not a positive number of seconds (at most 1e8)");
  }
  return secs;
}

// `name`=`value` for every rank, checked now against the config table.
Status SetSetting(Options& o, const std::string& flag, const std::string& given,
                  const std::string& name, const std::string& value) {
  auto checked = ConfigFromEnv({{name, value}});
  if (!checked.ok())
    return InvalidArgument(flag + " '" + given + "': " + checked.status().message());
  o.settings[name] = value;
  return Status::Ok();
}

Status NoValue(Options&, const std::string&, const std::string&) { return Status::Ok(); }

Status SetController(Options& o, const std::string& flag, const std::string& which) {
  if (!o.controller.empty() && o.controller != which) {
    return InvalidArgument(flag + ": --gloo and --mpi exclude each other; give one");
  }
  o.controller = which;
  if (which == "mpi") o.mpi = true;
  return Status::Ok();
}

bool IsVariableName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

constexpr const char* kAutotune =
    "Hora has no autotuner yet: set --fusion-threshold-mb, --cycle-time-ms and "
    "--cache-capacity yourself";
constexpr const char* kHierarchical =
    "Hora has no hierarchical allgather or torus allreduce yet (its algorithms: "
    "HORA_ALLREDUCE_ALGO and HORA_HIERARCHICAL_ALLREDUCE in horarun --print-config)";

const std::vector<FlagSpec>& Table() {
  static const std::vector<FlagSpec> table = {
      // --- the job
      {"Job", "-np|--num-proc|-n|--np", "N", "np",
       "number of processes (default: one per slot of -H or --hostfile)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         HORA_ASSIGN_OR_RETURN(long long n,
                               Whole(f, v, 1, 100000, "is not a process count (1 to 100000)"));
         o.np = static_cast<int>(n);
         return Status::Ok();
       }},
      {"Job", "-H|--hosts", "HOST:SLOTS,...", "hosts",
       "hosts and their slots; ranks fill them in order (default localhost:N)",
       [](Options& o, const std::string&, const std::string& v) -> Status {
         o.host_list = v;
         return Status::Ok();
       }},
      {"Job", "-hostfile|--hostfile", "FILE", "hostfile",
       "hosts, one a line: 'HOST slots=N', 'HOST:N' or 'HOST'; '#' comments",
       [](Options& o, const std::string&, const std::string& v) -> Status {
         o.hostfile = v;
         return Status::Ok();
       }},
      {"Job", "-x", "NAME[=VALUE]", "exports",
       "give every rank NAME from this environment, or NAME=VALUE (repeatable)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         if (!IsVariableName(v.substr(0, v.find('=')))) {
           return Bad(f, v, "does not start with a variable name (letters, digits, _)");
         }
         o.exports.push_back(v);
         return Status::Ok();
       }},
      {"Job", "--config-file", "FILE", "config_file",
       "horovodrun's YAML settings (controller, params, autotune, timeline, stall_check, "
       "library_options, logging); flags given here win over it",
       [](Options& o, const std::string&, const std::string& v) -> Status {
         o.config_file = v;
         return Status::Ok();
       }},
      {"Job", "--output-filename", "DIR", "output_dir",
       "also write each rank's output to DIR/rank.<rank>/stdout and stderr",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         if (v.empty()) return Bad(f, v, "is not a directory name");
         o.output_dir = v;
         return Status::Ok();
       }},
      {"Job", "--no-prefix", nullptr, "prefix", "do not prefix output lines with [rank]",
       [](Options& o, const std::string&, const std::string&) -> Status {
         o.prefix_output = false;
         return Status::Ok();
       }},
      {"Job", "--verbose", nullptr, "verbose",
       "say what horarun sets and where each rank starts, on stderr",
       [](Options& o, const std::string&, const std::string&) -> Status {
         o.verbose = true;
         return Status::Ok();
       }},
      {"Job", "--timeout", "SECONDS", "timeout",
       "the ranks' collective timeout (HORA_TIMEOUT_S; default none)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         HORA_ASSIGN_OR_RETURN(o.timeout_s, PositiveSeconds(f, v));
         return Status::Ok();
       }},
      {"Job", "--start-timeout", "SECONDS", "start_timeout",
       "bound of the ranks' start and rendezvous (HORA_START_TIMEOUT_S, default 120)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         HORA_ASSIGN_OR_RETURN(o.start_timeout_s, PositiveSeconds(f, v));
         return Status::Ok();
       }},
      {"Job", "--stop-grace", "SECONDS", "stop_grace",
       "time from SIGTERM to SIGKILL when ranks are stopped (default 5)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         HORA_ASSIGN_OR_RETURN(o.stop_grace_s, PositiveSeconds(f, v));
         return Status::Ok();
       }},
      {"Job", "--print-config", nullptr, "print_config",
       "print every HORA_* setting with its value and meaning, then exit",
       [](Options& o, const std::string&, const std::string&) -> Status {
         o.print_config = true;
         return Status::Ok();
       }},
      {"Job", "-v|--version", nullptr, "version", "print horarun's version, then exit",
       [](Options& o, const std::string&, const std::string&) -> Status {
         o.version = true;
         return Status::Ok();
       }},
      {"Job", "-cb|--check-build", nullptr, "check_build",
       "print the frameworks, launchers and collectives this build has, then exit",
       [](Options& o, const std::string&, const std::string&) -> Status {
         o.check_build = true;
         return Status::Ok();
       }},
      {"Job", "-h|--help", nullptr, "help", "print this text, then exit",
       [](Options& o, const std::string&, const std::string&) -> Status {
         o.help = true;
         return Status::Ok();
       }},
      // --- how ranks start
      {"Start", "--gloo", nullptr, "controller",
       "start the ranks with horarun itself (the default; Hora's own transports)",
       [](Options& o, const std::string& f, const std::string&) -> Status {
         return SetController(o, f, "gloo");
       }},
      {"Start", "--mpi", nullptr, "controller", "start the ranks with mpirun (OpenMPI or MPICH)",
       [](Options& o, const std::string& f, const std::string&) -> Status {
         return SetController(o, f, "mpi");
       }},
      {"Start", "--mpirun", "PATH", "mpirun", "the mpirun to use; implies --mpi (default mpirun)",
       [](Options& o, const std::string&, const std::string& v) -> Status {
         o.mpirun = v;
         o.mpi = true;
         return Status::Ok();
       }},
      {"Start", "--jsrun", nullptr, "controller", "", nullptr,
       "LSF's jsrun is not supported: use horarun's own start or --mpi"},
      {"Start", "--transport", "shm|tcp|mpi", "transport",
       "transport between ranks (default: shared memory within a host, TCP across); mpi "
       "implies --mpi",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         if (v != "shm" && v != "tcp" && v != "mpi")
           return Bad(f, v, "is not one of shm, tcp, mpi");
         o.transport = v;
         if (v == "mpi") o.mpi = true;  // only an MPI launcher can give it
         return Status::Ok();
       }},
      {"Start", "--network-interface|--network-interfaces", "NIC[,NIC]", "nics",
       "network interface for TCP (HORA_IFACE: the first; NCCL_SOCKET_IFNAME: all); "
       "repeatable",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         size_t added = 0;
         for (size_t p = 0; p <= v.size();) {
           size_t q = v.find(',', p);
           if (q == std::string::npos) q = v.size();
           if (q > p) {
             o.nics.push_back(v.substr(p, q - p));
             ++added;
           }
           p = q + 1;
         }
         if (added == 0) return Bad(f, v, "names no network interface");
         return Status::Ok();
       }},
      {"Start", "--bind", "ADDR", "bind",
       "this machine's address that every host reaches, for the rendezvous server",
       [](Options& o, const std::string&, const std::string& v) -> Status {
         o.bind = v;
         return Status::Ok();
       }},
      {"Start", "--bind-to", "core|none", "bind_to",
       "core: each rank of a host on a CPU of its own (HORA_BIND_TO; default none)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         if (v != "core" && v != "none") return Bad(f, v, "is not one of core, none");
         o.bind_to = v;
         return Status::Ok();
       }},
      {"Start", "--rsh", "'CMD ARGS'", "rsh",
       "how ranks on other hosts start (default 'ssh -o BatchMode=yes -o "
       "StrictHostKeyChecking=accept-new')",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         o.rsh.clear();
         for (size_t p = 0; p < v.size();) {
           size_t q = v.find(' ', p);
           if (q == std::string::npos) q = v.size();
           if (q > p) o.rsh.push_back(v.substr(p, q - p));
           p = q + 1;
         }
         if (o.rsh.empty()) return InvalidArgument(f + " needs a command");
         return Status::Ok();
       }},
      {"Start", "-p|--ssh-port", "PORT", "ssh_port", "ssh port of the other hosts",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         HORA_ASSIGN_OR_RETURN(long long port, Whole(f, v, 1, 65535, "is not a port (1 to 65535)"));
         o.ssh_port = static_cast<int>(port);
         return Status::Ok();
       }},
      {"Start", "-i|--ssh-identity-file", "FILE", "ssh_identity", "ssh identity (private key)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         if (v.empty()) return Bad(f, v, "is not a file name");
         o.ssh_identity = v;
         return Status::Ok();
       }},
      {"Start", "--disable-cache", nullptr, "disable_cache",
       "accepted: horarun keeps no cache of host checks (horovodrun's ~/.horovod)", NoValue},
      {"Start", "--tcp", nullptr, "tcp",
       "accepted: Hora uses TCP across hosts; exports NCCL_IB_DISABLE=1 as horovodrun",
       [](Options& o, const std::string&, const std::string&) -> Status {
         o.settings["NCCL_IB_DISABLE"] = "1";
         return Status::Ok();
       }},
      {"Start", "--mpi-args", "ARGS", "mpi_args", "", nullptr,
       "horarun does not pass extra arguments to mpirun yet"},
      {"Start", "--binding-args", "ARGS", "binding_args", "", nullptr,
       "horarun does not pass binding arguments to mpirun yet (--bind-to core binds ranks)"},
      // --- tunables: HORA_* settings for every rank
      {"Tuning", "--fusion-threshold-mb", "MB", "fusion_threshold",
       "fusion buffer size in MiB, 0 turns fusion off (HORA_FUSION_THRESHOLD_BYTES)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         HORA_ASSIGN_OR_RETURN(
             long long mb, Whole(f, v, 0, 1LL << 30, "is not a whole number of MiB, 0 or more"));
         return SetSetting(o, f, v, "HORA_FUSION_THRESHOLD_BYTES", std::to_string(mb << 20));
       }},
      {"Tuning", "--cycle-time-ms", "MS", "cycle_time", "engine cycle time (HORA_CYCLE_TIME_MS)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         HORA_RETURN_IF_ERROR(NonNegative(f, v));
         return SetSetting(o, f, v, "HORA_CYCLE_TIME_MS", v);
       }},
      {"Tuning", "--cache-capacity", "N", "cache_capacity",
       "response cache entries, 0 turns it off (HORA_CACHE_CAPACITY)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         HORA_ASSIGN_OR_RETURN(long long n,
                               Whole(f, v, 0, 1LL << 40, "is not a whole number, 0 or more"));
         return SetSetting(o, f, v, "HORA_CACHE_CAPACITY", std::to_string(n));
       }},
      {"Tuning", "--no-hierarchical-allreduce", nullptr, "hierarchical_allreduce",
       "flat allreduce across hosts, the default (HORA_HIERARCHICAL_ALLREDUCE=0)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         return SetSetting(o, f, v, "HORA_HIERARCHICAL_ALLREDUCE", "0");
       }},
      {"Tuning", "--hierarchical-allreduce", nullptr, "hierarchical_allreduce",
       "allreduce within each host, across hosts, then within it again "
       "(HORA_HIERARCHICAL_ALLREDUCE=1)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         return SetSetting(o, f, v, "HORA_HIERARCHICAL_ALLREDUCE", "1");
       }},
      {"Tuning", "--no-hierarchical-allgather", nullptr, "hierarchical_allgather",
       "accepted: Hora's allgather is not hierarchical", NoValue},
      {"Tuning", "--hierarchical-allgather", nullptr, "hierarchical_allgather", "", nullptr,
       kHierarchical},
      {"Tuning", "--no-torus-allreduce", nullptr, "torus_allreduce",
       "accepted: Hora has no torus allreduce", NoValue},
      {"Tuning", "--torus-allreduce", nullptr, "torus_allreduce", "", nullptr, kHierarchical},
      {"Tuning", "--no-autotune", nullptr, "autotune", "accepted: the default", NoValue},
      {"Tuning", "--autotune", nullptr, "autotune", "", nullptr, kAutotune},
      {"Tuning", "--autotune-log-file", "FILE", "autotune_log_file", "", nullptr, kAutotune},
      {"Tuning", "--autotune-warmup-samples", "N", "autotune_warmup_samples", "", nullptr,
       kAutotune},
      {"Tuning", "--autotune-steps-per-sample", "N", "autotune_steps_per_sample", "", nullptr,
       kAutotune},
      {"Tuning", "--autotune-bayes-opt-max-samples", "N", "autotune_bayes_opt_max_samples", "",
       nullptr, kAutotune},
      {"Tuning", "--autotune-gaussian-process-noise", "X", "autotune_gaussian_process_noise", "",
       nullptr, kAutotune},
      {"Tuning", "--mpi-threads-disable", nullptr, "mpi_threads_disable", "", nullptr,
       "Hora has no equivalent of HOROVOD_MPI_THREADS_DISABLE"},
      {"Tuning", "--num-nccl-streams", "N", "num_nccl_streams", "", nullptr,
       "Hora has no setting for the number of NCCL streams"},
      {"Tuning", "--thread-affinity", "CPU", "thread_affinity", "", nullptr,
       "Hora has no equivalent of HOROVOD_THREAD_AFFINITY (--bind-to core binds each rank)"},
      {"Tuning", "--gloo-timeout-seconds", "SECONDS", "gloo_timeout", "", nullptr,
       "Hora does not use Gloo: --start-timeout bounds the ranks' start, --timeout their "
       "collectives"},
      // --- timeline, stalls, logs
      {"Diagnostics", "--timeline-filename", "FILE", "timeline",
       "write a Chrome-trace timeline (HORA_TIMELINE)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         if (v.empty()) return Bad(f, v, "is not a file name");
         return SetSetting(o, f, v, "HORA_TIMELINE", v);
       }},
      {"Diagnostics", "--timeline-mark-cycles", nullptr, "timeline_mark_cycles", "", nullptr,
       "Hora's timeline does not mark engine cycles yet"},
      {"Diagnostics", "--no-stall-check", nullptr, "stall_check",
       "no stall reports and no stall shutdown (HORA_STALL_WARNING_S=0, HORA_STALL_SHUTDOWN_S=0)",
       [](Options& o, const std::string&, const std::string&) -> Status {
         o.stall_check = false;
         return Status::Ok();
       }},
      {"Diagnostics", "--stall-check", nullptr, "stall_check", "stall reports on (the default)",
       [](Options& o, const std::string&, const std::string&) -> Status {
         o.stall_check = true;
         return Status::Ok();
       }},
      {"Diagnostics", "--stall-check-warning-time-seconds", "SECONDS", "stall_warning",
       "report a stalled collective after this long (HORA_STALL_WARNING_S, default 60)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         HORA_RETURN_IF_ERROR(NonNegative(f, v));
         return SetSetting(o, f, v, "HORA_STALL_WARNING_S", v);
       }},
      {"Diagnostics", "--stall-check-shutdown-time-seconds", "SECONDS", "stall_shutdown",
       "fail a stalled collective after this long (HORA_STALL_SHUTDOWN_S, default 0: never)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         HORA_RETURN_IF_ERROR(NonNegative(f, v));
         return SetSetting(o, f, v, "HORA_STALL_SHUTDOWN_S", v);
       }},
      {"Diagnostics", "--log-level", "LEVEL", "log_level",
       "TRACE, DEBUG, INFO, WARNING, ERROR or FATAL (HORA_LOG_LEVEL; FATAL is error)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         std::string l;
         for (char c : v) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
         if (l == "fatal") l = "error";
         if (l != "trace" && l != "debug" && l != "info" && l != "warning" && l != "error") {
           return Bad(f, v, "is not one of TRACE, DEBUG, INFO, WARNING, ERROR, FATAL");
         }
         return SetSetting(o, f, v, "HORA_LOG_LEVEL", l);
       }},
      {"Diagnostics", "--log-without-timestamp|--log-hide-timestamp", nullptr, "log_timestamp",
       "accepted: Hora's log lines carry no timestamp", NoValue},
      {"Diagnostics", "--log-with-timestamp|--no-log-hide-timestamp", nullptr, "log_timestamp", "",
       nullptr, "Hora's log lines carry no timestamp yet"},
      {"Diagnostics", "-prefix-timestamp|--prefix-output-with-timestamp", nullptr,
       "prefix_timestamp", "", nullptr, "horarun does not timestamp output lines yet"},
      // --- elastic
      {"Elastic", "--min-np|--min-num-proc", "N", "min_np",
       "elastic mode: the job goes on while at least N workers remain (default -np)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         HORA_ASSIGN_OR_RETURN(long long n,
                               Whole(f, v, 1, 100000, "is not a process count (1 to 100000)"));
         o.min_np = static_cast<int>(n);
         return Status::Ok();
       }},
      {"Elastic", "--max-np|--max-num-proc", "N", "max_np",
       "elastic mode: at most N workers (default -np)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         HORA_ASSIGN_OR_RETURN(long long n,
                               Whole(f, v, 1, 100000, "is not a process count (1 to 100000)"));
         o.max_np = static_cast<int>(n);
         return Status::Ok();
       }},
      {"Elastic", "--host-discovery-script", "SCRIPT", "host_discovery_script",
       "elastic mode: hosts from SCRIPT (run now and every second), one \"host\" or "
       "\"host:slots\" per line of its output; workers start on new slots and stop on "
       "slots gone",
       [](Options& o, const std::string&, const std::string& v) -> Status {
         o.discovery_script = v;
         return Status::Ok();
       }},
      {"Elastic", "--slots-per-host", "N", "slots_per_host",
       "elastic mode: the slots of a host the discovery script names without a count",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         HORA_ASSIGN_OR_RETURN(long long n,
                               Whole(f, v, 1, 100000, "is not a slot count (1 to 100000)"));
         o.slots_per_host = static_cast<int>(n);
         return Status::Ok();
       }},
      {"Elastic", "--elastic-timeout", "SECONDS", "elastic_timeout",
       "elastic mode: how long fewer than --min-np workers may remain, and how long the others "
       "wait for a worker that does not come back to init() (default 600)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         HORA_ASSIGN_OR_RETURN(o.elastic_timeout_s, PositiveSeconds(f, v));
         return Status::Ok();
       }},
      {"Elastic", "--reset-limit", "N", "reset_limit",
       "elastic mode: end the job rather than re-form its world more than N times",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         HORA_ASSIGN_OR_RETURN(long long n,
                               Whole(f, v, 0, 1000000000, "is not a count (0 or more)"));
         o.reset_limit = static_cast<int>(n);
         return Status::Ok();
       }},
      {"Elastic", "--blacklist-cooldown-range", "MIN MAX", "blacklist_cooldown_range",
       "elastic mode with --host-discovery-script: a host whose worker fails gets no new worker "
       "for MIN seconds, doubled at each failure there up to MAX (without it: never again)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         const size_t space = v.find(' ');
         const std::string lo = v.substr(0, space);
         const std::string hi = space == std::string::npos ? "" : v.substr(space + 1);
         HORA_ASSIGN_OR_RETURN(o.blacklist_cooldown_s.first, PositiveSeconds(f, lo));
         HORA_ASSIGN_OR_RETURN(o.blacklist_cooldown_s.second, PositiveSeconds(f, hi));
         if (o.blacklist_cooldown_s.first > o.blacklist_cooldown_s.second) {
           return InvalidArgument(f + " '" + v + "': MIN is above MAX");
         }
         return Status::Ok();
       }},
  };
  return table;
}

}  // namespace

const std::vector<FlagSpec>& Flags() { return Table(); }

const FlagSpec* FindFlag(std::string_view name) {
  for (const FlagSpec& f : Table()) {
    std::string_view names = f.names;
    for (size_t p = 0; p <= names.size();) {
      size_t q = names.find('|', p);
      if (q == std::string_view::npos) q = names.size();
      if (names.substr(p, q - p) == name) return &f;
      p = q + 1;
    }
  }
  return nullptr;
}

Status ApplyFlag(const FlagSpec& spec, Options& o, const std::string& flag,
                 const std::string& value) {
  if (spec.unsupported != nullptr) return InvalidArgument(flag + ": " + spec.unsupported);
  return spec.apply(o, flag, value);
}

std::string FlagsHelp() {
  std::string out;
  const char* group = "";
  for (const FlagSpec& f : Table()) {
    if (std::string(group) != f.group) {
      group = f.group;
      out += std::string("\n") + group + ":\n";
    }
    std::string left = "  ";
    std::string names = f.names;
    for (size_t p; (p = names.find('|')) != std::string::npos;) names.replace(p, 1, ", ");
    left += names;
    if (f.metavar != nullptr) left += std::string(" ") + f.metavar;
    const std::string text =
        f.unsupported != nullptr ? std::string("refused: ") + f.unsupported : f.help;
    if (left.size() < 36) {
      out += left + std::string(38 - left.size(), ' ') + text + "\n";
    } else {
      out += left + "\n" + std::string(38, ' ') + text + "\n";
    }
  }
  return out;
}

}  // namespace hora::horarun
