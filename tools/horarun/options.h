// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// horarun's command line: horovodrun's flags (flags.h lists them, with what
// each sets), Hora's own, and a YAML --config-file (config_file.h), then
// the command to run. Bad input is an error before anything starts, naming
// the flag and value.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hora/status.h"
#include "hosts.h"

namespace hora::horarun {

struct Options {
  // What horarun says before it starts (a config file's unknown keys).
  std::vector<std::string> notices;
  int np = 0;
  std::vector<HostSlots> hosts;  // localhost:np when neither -H nor --hostfile
  std::string transport;         // "" = Hora chooses per pair
  // Start the ranks with mpirun instead of horarun's own spawner (--mpi,
  // --mpirun, or --transport mpi, which only an MPI launcher can provide).
  bool mpi = false;
  std::string mpirun = "mpirun";
  // Seconds given by --timeout (HORA_TIMEOUT_S, the ranks' collective
  // timeout) and --start-timeout (HORA_START_TIMEOUT_S); 0: not given, the
  // environment's value or the default holds.
  double timeout_s = 0;
  double start_timeout_s = 0;
  // How long a rank (and what it started) has after SIGTERM before SIGKILL,
  // when horarun stops the job or the rank ended (--stop-grace).
  double stop_grace_s = 5;
  bool prefix_output = true;
  // How ranks on other hosts are started: the command and its options,
  // followed by the host name and a shell command line (default ssh, with
  // -p and -i when --ssh-port and --ssh-identity-file are given).
  std::vector<std::string> rsh = {"ssh", "-o", "BatchMode=yes", "-o",
                                  "StrictHostKeyChecking=accept-new"};
  // Address of this machine that every host can reach, for the rendezvous
  // server; "" = 127.0.0.1 for single-host jobs, else HORA_IFACE's address.
  std::string bind;
  // HORA_BIND_TO for the ranks ("" = leave the environment's value).
  std::string bind_to;
  bool print_config = false;
  bool help = false;
  bool version = false;
  bool check_build = false;
  bool verbose = false;
  // --output-filename: each rank's output is also written to
  // DIR/rank.<rank, zero-padded to the width of np-1>/{stdout,stderr}.
  std::string output_dir;
  // -x NAME or -x NAME=VALUE, in order: variables every rank gets.
  std::vector<std::string> exports;
  // Variables every rank gets from the flags and the config file (HORA_*
  // settings, NCCL_SOCKET_IFNAME), over the environment's; and for each,
  // the flag or config-file line it came from, for error messages.
  std::map<std::string, std::string> settings;
  std::map<std::string, std::string> setting_sources;
  std::vector<std::string> command;
  // Elastic mode (--min-np or --max-np): workers that are lost leave the
  // job, which goes on while at least min_np remain (docs/dev/elastic.md).
  // After ParseOptions, 1 <= min_np <= np <= max_np when elastic.
  int min_np = 0, max_np = 0;
  double elastic_timeout_s = 600;  // --elastic-timeout
  std::optional<int> reset_limit;  // --reset-limit
  // --host-discovery-script (elastic mode) and --slots-per-host (0: none).
  std::string discovery_script;
  int slots_per_host = 0;
  // --blacklist-cooldown-range MIN MAX (seconds; {0, 0}: not given).
  std::pair<double, double> blacklist_cooldown_s{0, 0};
  bool elastic() const { return min_np > 0 || max_np > 0 || !discovery_script.empty(); }

  // Flag values read before they are resolved (ParseOptions resolves them
  // into the fields above).
  std::string host_list, hostfile, config_file, controller;
  int ssh_port = 0;
  std::string ssh_identity;
  std::vector<std::string> nics;
  std::optional<bool> stall_check;
};

// `args` excludes argv[0]. `read_file` loads a hostfile or config file
// (injected for tests); its error needs no file name, the caller adds it.
Result<Options> ParseOptions(const std::vector<std::string>& args,
                             Result<std::string> (*read_file)(const std::string& path));

Result<std::string> ReadWholeFile(const std::string& path);

// The help text: how horarun runs a job, then every flag (flags.h).
std::string Usage();

}  // namespace hora::horarun
