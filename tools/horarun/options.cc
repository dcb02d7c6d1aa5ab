// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace hora::horarun {

const char* Usage() {
  return "usage: horarun -np N [-H host:slots,...] [--hostfile FILE] [--transport shm|tcp|mpi]\n"
         "               [--mpi] [--mpirun PATH] [--timeout SECONDS] [--start-timeout SECONDS]\n"
         "               [--stop-grace SECONDS] [--no-prefix]\n"
         "               [--rsh 'ssh -o ...'] [--bind ADDR] [--bind-to core|none]\n"
         "               [--print-config]\n"
         "               [--] command [args...]\n"
         "\n"
         "Starts N copies of command with the rank layout, the rendezvous address and\n"
         "the job secret in their environment (HORA_RANK, HORA_SIZE, HORA_LOCAL_RANK,\n"
         "HORA_LOCAL_SIZE, HORA_CROSS_RANK, HORA_CROSS_SIZE, HORA_STORE_ADDR, HORA_SECRET).\n"
         "Output lines are prefixed with [rank]. When a rank fails, the others are\n"
         "stopped and horarun exits with that rank's exit code. Ranks on other hosts\n"
         "start through --rsh (default ssh): RSH... HOST sh -c '...' (the secret goes on\n"
         "its stdin; the rank stops when horarun's end of that stdin closes).\n"
         "--bind names this machine's address for the rendezvous server.\n"
         "--bind-to core runs each rank of a host on a CPU of its own (HORA_BIND_TO;\n"
         "default none; no binding where a host's ranks outnumber its CPUs).\n"
         "--mpi hands the start to mpirun (OpenMPI or MPICH, --mpirun PATH, default\n"
         "mpirun); --transport mpi implies it.\n"
         "--timeout sets the ranks' collective timeout (HORA_TIMEOUT_S; default none: a\n"
         "rank that is alive is waited for, and reported every HORA_STALL_WARNING_S);\n"
         "--start-timeout bounds their rendezvous (HORA_START_TIMEOUT_S, default 120).\n"
         "A rank lost (gone, or silent for HORA_PEER_TIMEOUT_S) fails the others.\n"
         "Stopping ranks: SIGTERM (and SIGCONT, for a stopped one), then SIGKILL after\n"
         "--stop-grace seconds (default 5); when horarun itself is killed, a watcher\n"
         "process does the same; a rank's process group goes with it also when it\n"
         "ends well.\n";
}

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("--hostfile '" + path + "': " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<Options> ParseOptions(const std::vector<std::string>& args,
                             Result<std::string> (*read_file)(const std::string&)) {
  Options o;
  std::string host_list, hostfile;
  size_t i = 0;
  auto value = [&](const std::string& flag) -> Result<std::string> {
    if (i + 1 >= args.size()) return InvalidArgument(flag + " needs a value");
    return args[++i];
  };
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "-np" || a == "-n" || a == "--np") {
      HORA_ASSIGN_OR_RETURN(std::string v, value(a));
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 100000) {
        return InvalidArgument(a + " '" + v + "' is not a process count (1 to 100000)");
      }
      o.np = static_cast<int>(n);
    } else if (a == "-H" || a == "--hosts") {
      HORA_ASSIGN_OR_RETURN(host_list, value(a));
    } else if (a == "--hostfile") {
      HORA_ASSIGN_OR_RETURN(hostfile, value(a));
    } else if (a == "--transport") {
      HORA_ASSIGN_OR_RETURN(o.transport, value(a));
      if (o.transport != "shm" && o.transport != "tcp" && o.transport != "mpi") {
        return InvalidArgument("--transport '" + o.transport + "' is not one of shm, tcp, mpi");
      }
      if (o.transport == "mpi") o.mpi = true;  // only an MPI launcher can give it
    } else if (a == "--mpi") {
      o.mpi = true;
    } else if (a == "--mpirun") {
      HORA_ASSIGN_OR_RETURN(o.mpirun, value(a));
      o.mpi = true;
    } else if (a == "--timeout" || a == "--start-timeout" || a == "--stop-grace") {
      HORA_ASSIGN_OR_RETURN(std::string v, value(a));
      char* end = nullptr;
      const double secs = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !std::isfinite(secs) || secs <= 0 || secs > 1e8) {
        return InvalidArgument(a + " '" + v +
                               "' is not a positive number of seconds (at most 1e8)");
      }
      (a == "--timeout"         ? o.timeout_s
       : a == "--start-timeout" ? o.start_timeout_s
                                : o.stop_grace_s) = secs;
    } else if (a == "--rsh") {
      HORA_ASSIGN_OR_RETURN(std::string v, value(a));
      o.rsh.clear();
      for (size_t p = 0; p < v.size();) {
        size_t q = v.find(' ', p);
        if (q == std::string::npos) q = v.size();
        if (q > p) o.rsh.push_back(v.substr(p, q - p));
        p = q + 1;
      }
      if (o.rsh.empty()) return InvalidArgument("--rsh needs a command");
    } else if (a == "--bind") {
      HORA_ASSIGN_OR_RETURN(o.bind, value(a));
    } else if (a == "--bind-to") {
      HORA_ASSIGN_OR_RETURN(o.bind_to, value(a));
      if (o.bind_to != "core" && o.bind_to != "none") {
        return InvalidArgument("--bind-to '" + o.bind_to + "' is not one of core, none");
      }
    } else if (a == "--no-prefix") {
      o.prefix_output = false;
    } else if (a == "--print-config") {
      o.print_config = true;
    } else if (a == "-h" || a == "--help") {
      o.help = true;
    } else if (!a.empty() && a[0] == '-') {
      return InvalidArgument("unknown option '" + a + "' (see horarun --help)");
    } else {
      break;  // the command starts here
    }
  }
  for (; i < args.size(); ++i) o.command.push_back(args[i]);
  if (o.help || o.print_config) return o;

  if (!host_list.empty() && !hostfile.empty()) {
    return InvalidArgument("give either -H or --hostfile, not both");
  }
  if (!host_list.empty()) {
    HORA_ASSIGN_OR_RETURN(o.hosts, ParseHostList(host_list));
  } else if (!hostfile.empty()) {
    HORA_ASSIGN_OR_RETURN(std::string contents, read_file(hostfile));
    HORA_ASSIGN_OR_RETURN(o.hosts, ParseHostfile(contents, hostfile));
  }
  if (o.np == 0) {
    if (o.hosts.empty()) return InvalidArgument("-np is required (how many processes to start)");
    for (const auto& h : o.hosts) o.np += h.slots;  // like mpirun: one per slot
  }
  if (o.hosts.empty()) o.hosts = {{"localhost", o.np}};
  HORA_RETURN_IF_ERROR(PlaceRanks(o.np, o.hosts).status());
  for (const auto& h : o.hosts) {
    if (o.mpi && h.host.find(':') != std::string::npos) {
      return InvalidArgument("host '" + h.host +
                             "': mpirun's host lists take no IPv6 addresses; with --mpi (or "
                             "--transport mpi) give the hosts by name");
    }
  }
  if (o.command.empty()) return InvalidArgument("no command given to run (see horarun --help)");
  return o;
}

}  // namespace hora::horarun
