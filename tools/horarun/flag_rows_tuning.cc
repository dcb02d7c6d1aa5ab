// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include <cctype>
#include <string>
#include <vector>

#include "flag_rows.h"
#include "options.h"

namespace hora::horarun::flag_rows {
namespace {

constexpr const char* kBayes =
    "Hora's autotuning is not Bayesian: it scores each tunable's values in turn and stops by "
    "itself (docs/guide/tuning.md); --autotune-warmup-samples and --autotune-steps-per-sample "
    "shape it";
constexpr const char* kHierarchical =
    "Hora has no hierarchical allgather or torus allreduce yet (its algorithms: "
    "HORA_ALLREDUCE_ALGO and HORA_HIERARCHICAL_ALLREDUCE in horarun --print-config)";

}  // namespace

std::vector<FlagSpec> Tuning() {
  return {
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
       "flat allreduce across hosts (HORA_HIERARCHICAL_ALLREDUCE=0; by default the cost "
       "model chooses, size by size)",
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
      {"Tuning", "--no-autotune", nullptr, "autotune",
       "no autotuning, the default (HORA_AUTOTUNE=0)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         return SetSetting(o, f, v, "HORA_AUTOTUNE", "0");
       }},
      {"Tuning", "--autotune", nullptr, "autotune",
       "tune fusion, cycle time, cache, algorithm cut-off and hierarchical allreduce while the "
       "job trains (HORA_AUTOTUNE=1)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         return SetSetting(o, f, v, "HORA_AUTOTUNE", "1");
       }},
      {"Tuning", "--autotune-log-file", "FILE", "autotune_log_file",
       "autotuning's CSV log: each sample's settings and score, then the choice "
       "(HORA_AUTOTUNE_LOG)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         if (v.empty()) return Bad(f, v, "is not a file name");
         return SetSetting(o, f, v, "HORA_AUTOTUNE_LOG", v);
       }},
      {"Tuning", "--autotune-warmup-samples", "N", "autotune_warmup_samples",
       "samples autotuning leaves out first (HORA_AUTOTUNE_WARMUP_SAMPLES, default 3)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         HORA_ASSIGN_OR_RETURN(long long n,
                               Whole(f, v, 0, 1000000, "is not a whole number, 0 or more"));
         return SetSetting(o, f, v, "HORA_AUTOTUNE_WARMUP_SAMPLES", std::to_string(n));
       }},
      {"Tuning", "--autotune-steps-per-sample", "N", "autotune_steps_per_sample",
       "training steps each autotuning sample scores (HORA_AUTOTUNE_STEPS_PER_SAMPLE, default 10)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         HORA_ASSIGN_OR_RETURN(long long n,
                               Whole(f, v, 1, 1000000, "is not a whole number, 1 or more"));
         return SetSetting(o, f, v, "HORA_AUTOTUNE_STEPS_PER_SAMPLE", std::to_string(n));
       }},
      {"Tuning", "--autotune-bayes-opt-max-samples", "N", "autotune_bayes_opt_max_samples", "",
       nullptr, kBayes},
      {"Tuning", "--autotune-gaussian-process-noise", "X", "autotune_gaussian_process_noise", "",
       nullptr, kBayes},
      {"Tuning", "--no-mpi-threads-disable", nullptr, "mpi_threads_disable",
       "accepted: Hora asks MPI for MPI_THREAD_MULTIPLE where it uses MPI", NoValue},
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
      {"Diagnostics", "--no-timeline-mark-cycles", nullptr, "timeline_mark_cycles",
       "accepted: Hora's timeline marks no engine cycles", NoValue},
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
       "elastic mode: hosts from SCRIPT (run now and every second), one \"host\" (with "
       "--slots-per-host) or \"host:slots\" per line of its output; workers start on new slots "
       "and stop on slots gone",
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
       "elastic mode: how long fewer than --min-np workers may remain while the discovery "
       "script may bring more (without one the job ends at once), and how long the others "
       "wait for a worker that does not come back to init() (default 600, or "
       "HORA_ELASTIC_TIMEOUT_S / HOROVOD_ELASTIC_TIMEOUT)",
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         HORA_ASSIGN_OR_RETURN(o.elastic_timeout_s, PositiveSeconds(f, v));
         // (Over HORA_ELASTIC_TIMEOUT_S and HOROVOD_ELASTIC_TIMEOUT.)
         o.settings["HORA_ELASTIC_TIMEOUT_S"] = v;
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
}

}  // namespace hora::horarun::flag_rows
