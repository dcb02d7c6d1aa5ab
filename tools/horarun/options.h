// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
//
// horarun's command line:
//   horarun -np N [-H host:slots,...] [--hostfile F] [--transport shm|tcp|mpi]
//           [--mpi] [--mpirun PATH] [--timeout S] [--start-timeout S] [--stop-grace S]
//           [--no-prefix] [--rsh CMD] [--bind ADDR]
//           [--bind-to core|none] [--print-config]
//           [--] command args...
// Bad input is an error before anything starts, naming the flag and value.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "hora/status.h"
#include "hosts.h"

namespace hora::horarun {

struct Options {
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
  // followed by the host name and a shell command line (default ssh).
  std::vector<std::string> rsh = {"ssh", "-o", "BatchMode=yes", "-o",
                                  "StrictHostKeyChecking=accept-new"};
  // Address of this machine that every host can reach, for the rendezvous
  // server; "" = 127.0.0.1 for single-host jobs, else HORA_IFACE's address.
  std::string bind;
  // HORA_BIND_TO for the ranks ("" = leave the environment's value).
  std::string bind_to;
  bool print_config = false;
  bool help = false;
  std::vector<std::string> command;
};

// `args` excludes argv[0]. `read_file` loads a hostfile (injected for tests).
Result<Options> ParseOptions(const std::vector<std::string>& args,
                             Result<std::string> (*read_file)(const std::string& path));

Result<std::string> ReadWholeFile(const std::string& path);

const char* Usage();

}  // namespace hora::horarun
