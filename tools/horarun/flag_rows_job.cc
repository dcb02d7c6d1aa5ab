// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include <string>
#include <vector>

#include "flag_rows.h"
#include "options.h"

namespace hora::horarun::flag_rows {

std::vector<FlagSpec> Job() {
  return {
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
       [](Options& o, const std::string& f, const std::string& v) -> Status {
         // (Empty, as from an unset variable in "-H $HOSTS", is not "this host".)
         if (v.empty()) return InvalidArgument(f + " '': no hosts given");
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
       "library_options, logging); flags given here win over its values, but its stall_check "
       "enabled: false turns stall checks off whatever the time flags say, and its controller "
       "gloo beside --mpirun is refused",
       [](Options& o, const std::string&, const std::string& v) -> Status {
         o.config_file = v;
         return Status::Ok();
       }},
      {"Job", "--output-filename", "DIR", "output_dir",
       "also write each rank's output to DIR/rank.<rank>/stdout and stderr (the rank "
       "zero-padded to the width of np - 1; not with --mpi or --host-discovery-script)",
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
         o.settings.insert_or_assign("NCCL_IB_DISABLE", std::string(1, '1'));
         return Status::Ok();
       }},
      {"Start", "--mpi-args", "ARGS", "mpi_args", "", nullptr,
       "horarun does not pass extra arguments to mpirun yet"},
      {"Start", "--binding-args", "ARGS", "binding_args", "", nullptr,
       "horarun does not pass binding arguments to mpirun yet (--bind-to core binds ranks)"},
  };
}

}  // namespace hora::horarun::flag_rows
