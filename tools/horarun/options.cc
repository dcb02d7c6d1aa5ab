// Copyright (c) Hora authors. Licensed under the Apache License, Version 2.0.
#include "options.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "config_file.h"
#include "flags.h"
#include "yaml.h"

namespace hora::horarun {
namespace {

const char kIntro[] =
    "usage: horarun [-np N] [-H host:slots,... | --hostfile FILE] [flags...] [--] command "
    "[args...]\n"
    "\n"
    "Starts N copies of command with the rank layout, the rendezvous address and\n"
    "the job secret in their environment (HORA_RANK, HORA_SIZE, HORA_LOCAL_RANK,\n"
    "HORA_LOCAL_SIZE, HORA_CROSS_RANK, HORA_CROSS_SIZE, HORA_STORE_ADDR, HORA_SECRET;\n"
    "the layout also as HOROVOD_*; an elastic worker gets HORA_WORKER_ID instead\n"
    "and its layout from the rendezvous). Takes horovodrun's flags: each tunable becomes\n"
    "the HORA_* setting every rank gets (horarun --print-config lists them), and a\n"
    "flag Hora cannot honour yet is refused, saying why.\n"
    "Output lines are prefixed with [rank]. When a rank fails, the others are\n"
    "stopped and horarun exits with that rank's exit code. Ranks on other hosts\n"
    "start through --rsh (default ssh): RSH... HOST sh -c '...'. They get\n"
    "horarun's environment (less BASH_FUNC_*, OLDPWD, *CUDA_VISIBLE_DEVICES, the\n"
    "shell's own and ssh's variables), the settings and -x variables, and the job\n"
    "secret, all on their stdin, never on a command line; the rank stops when\n"
    "horarun's end of that stdin closes.\n"
    "A rank lost (gone, or silent for HORA_PEER_TIMEOUT_S) fails the others.\n"
    "Stopping ranks: SIGTERM (and SIGCONT, for a stopped one), then SIGKILL after\n"
    "--stop-grace seconds; when horarun itself is killed, a watcher process does\n"
    "the same; a rank's process group goes with it also when it ends well.\n";

std::string Join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

// The flags of the config file, where the command line did not set them.
Status ApplyConfigFile(Options& o, const std::set<std::string>& given,
                       Result<std::string> (*read_file)(const std::string&)) {
  auto text = read_file(o.config_file);
  if (!text.ok()) {
    return InvalidArgument("--config-file '" + o.config_file + "': " + text.status().message());
  }
  HORA_ASSIGN_OR_RETURN(YamlNode root, ParseYaml(*text, o.config_file));
  HORA_ASSIGN_OR_RETURN(auto flags, ConfigFileFlags(root, o.config_file, &o.notices));
  for (const ConfigFileFlag& f : flags) {
    const FlagSpec* spec = FindFlag(f.flag);
    if (spec == nullptr)
      return InternalError("config file flag " + f.flag + " is not in the table");
    if (given.count(spec->dest) != 0) continue;  // the command line wins
    Status st = ApplyFlag(*spec, o, f.flag, f.value);
    if (!st.ok()) return InvalidArgument(f.where + ": " + st.message());
  }
  return Status::Ok();
}

// Turns the flags' values into the settings every rank gets.
Status Resolve(Options& o) {
  if (o.stall_check == false) {
    o.settings["HORA_STALL_WARNING_S"] = "0";
    o.settings["HORA_STALL_SHUTDOWN_S"] = "0";
  }
  if (!o.nics.empty()) {
    o.settings["HORA_IFACE"] = o.nics.front();  // Hora's TCP uses one
    o.settings["NCCL_SOCKET_IFNAME"] = Join(o.nics, ",");
  }
  if (o.timeout_s > 0) o.settings["HORA_TIMEOUT_S"] = std::to_string(o.timeout_s);
  if (o.start_timeout_s > 0) o.settings["HORA_START_TIMEOUT_S"] = std::to_string(o.start_timeout_s);
  if (!o.bind_to.empty()) o.settings["HORA_BIND_TO"] = o.bind_to;
  if (!o.transport.empty()) o.settings["HORA_TRANSPORT"] = o.transport;
  if (o.controller == "gloo" && o.mpi) {
    return InvalidArgument(
        "--gloo starts the ranks with horarun itself, but --mpirun or --transport mpi needs "
        "mpirun (--mpi)");
  }
  if (o.ssh_port != 0 || !o.ssh_identity.empty()) {
    const std::string& rsh = o.rsh.front();
    if (rsh != "ssh" && (rsh.size() < 4 || rsh.compare(rsh.size() - 4, 4, "/ssh") != 0)) {
      return InvalidArgument("--ssh-port and --ssh-identity-file are ssh's options, but --rsh '" +
                             rsh + "' is not ssh");
    }
    if (o.ssh_port != 0) o.rsh.insert(o.rsh.end(), {"-p", std::to_string(o.ssh_port)});
    if (!o.ssh_identity.empty()) o.rsh.insert(o.rsh.end(), {"-i", o.ssh_identity});
  }
  return Status::Ok();
}

}  // namespace

std::string Usage() { return kIntro + FlagsHelp(); }

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument(std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<Options> ParseOptions(const std::vector<std::string>& args,
                             Result<std::string> (*read_file)(const std::string&)) {
  Options o;
  std::set<std::string> given;  // the dests set on the command line
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.empty() || a[0] != '-' || a == "-") break;  // the command starts here
    std::string flag = a, value;
    bool inline_value = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {  // --flag=value
      flag = a.substr(0, a.find('='));
      value = a.substr(a.find('=') + 1);
      inline_value = true;
    }
    HORA_ASSIGN_OR_RETURN(const FlagMatch match, MatchFlag(flag));
    const FlagSpec* spec = match.spec;
    if (spec == nullptr) {
      return InvalidArgument("unknown option '" + a + "' (see horarun --help)");
    }
    flag = match.name;  // (a prefix's errors name the whole flag)
    if (spec->unsupported != nullptr) return ApplyFlag(*spec, o, flag, value);
    if (spec->metavar != nullptr && !inline_value) {
      if (i + 1 >= args.size()) return InvalidArgument(flag + " needs a value");
      value = args[++i];
      // (A metavar of two words, unquoted, takes two values, as horovodrun's
      // nargs=2: --blacklist-cooldown-range MIN MAX. A quoted one is one.)
      const std::string_view metavar(spec->metavar);
      if (metavar.front() != '\'' && metavar.find(' ') != std::string_view::npos) {
        if (i + 1 >= args.size()) return InvalidArgument(flag + " needs two values");
        value += " " + args[++i];
      }
    } else if (spec->metavar == nullptr && inline_value) {
      return InvalidArgument(flag + " takes no value");
    }
    given.insert(spec->dest);
    HORA_RETURN_IF_ERROR(ApplyFlag(*spec, o, flag, value));
  }
  for (; i < args.size(); ++i) o.command.push_back(args[i]);
  if (o.help || o.version || o.check_build) return o;
  if (!o.config_file.empty()) HORA_RETURN_IF_ERROR(ApplyConfigFile(o, given, read_file));
  HORA_RETURN_IF_ERROR(Resolve(o));
  if (o.mpi) {
    // mpirun starts the ranks and stops them: horarun's own ways are unused,
    // and horarun does not hand these to mpirun yet.
    for (const auto& [dest, flag, instead] :
         {std::tuple{"rsh", "--rsh", "OMPI_MCA_plm_rsh_agent"},
          std::tuple{"ssh_port", "--ssh-port (-p)", "~/.ssh/config or OMPI_MCA_plm_rsh_args"},
          std::tuple{"ssh_identity", "--ssh-identity-file (-i)",
                     "~/.ssh/config or OMPI_MCA_plm_rsh_args"},
          std::tuple{"stop_grace", "--stop-grace", "mpirun's own handling of signals"}}) {
      if (given.count(dest) != 0) {
        return InvalidArgument(std::string(flag) +
                               " is not passed to mpirun yet, and mpirun starts and stops the "
                               "ranks here (--mpi, --mpirun, --transport mpi or the config "
                               "file's controller: mpi): use " +
                               instead + " instead");
      }
    }
  }
  if (o.print_config) return o;

  if (!o.host_list.empty() && !o.hostfile.empty()) {
    return InvalidArgument("give either -H or --hostfile, not both");
  }
  if (o.slots_per_host > 0 && o.discovery_script.empty()) {
    return InvalidArgument(
        "--slots-per-host needs --host-discovery-script (-H and --hostfile give each host's "
        "slots)");
  }
  if (o.blacklist_cooldown_s.second > 0 && o.discovery_script.empty()) {
    return InvalidArgument(
        "--blacklist-cooldown-range needs --host-discovery-script (only then does horarun start "
        "workers on free slots)");
  }
  if (!o.discovery_script.empty()) {
    // (The hosts come from the script, run when the job starts.)
    if (!o.host_list.empty() || !o.hostfile.empty()) {
      return InvalidArgument("give either --host-discovery-script or -H/--hostfile, not both");
    }
    if (o.np == 0) return InvalidArgument("-np is required (how many workers to start)");
    if (o.mpi) {
      return InvalidArgument(
          "elastic mode starts its workers itself: not with --mpi (an MPI job's world is "
          "fixed)");
    }
    if (!o.output_dir.empty()) {
      return InvalidArgument("--output-filename is not supported with --host-discovery-script yet");
    }
    if (o.min_np == 0) o.min_np = std::min(o.np, o.max_np > 0 ? o.max_np : o.np);
    if (o.max_np == 0) o.max_np = std::max(o.np, o.min_np);
    if (o.min_np > o.np || o.np > o.max_np) {
      return InvalidArgument("elastic mode needs --min-np <= -np <= --max-np (got " +
                             std::to_string(o.min_np) + ", " + std::to_string(o.np) + ", " +
                             std::to_string(o.max_np) + ")");
    }
    if (o.command.empty()) return InvalidArgument("no command given to run (see horarun --help)");
    return o;
  }
  if (!o.host_list.empty()) {
    HORA_ASSIGN_OR_RETURN(o.hosts, ParseHostList(o.host_list));
  } else if (!o.hostfile.empty()) {
    auto contents = read_file(o.hostfile);
    if (!contents.ok()) {
      return InvalidArgument("--hostfile '" + o.hostfile + "': " + contents.status().message());
    }
    HORA_ASSIGN_OR_RETURN(o.hosts, ParseHostfile(*contents, o.hostfile));
  }
  if (o.np == 0) {
    if (o.hosts.empty()) return InvalidArgument("-np is required (how many processes to start)");
    for (const auto& h : o.hosts) o.np += h.slots;  // like mpirun: one per slot
  }
  if (o.hosts.empty()) o.hosts = {{"localhost", o.np}};
  HORA_RETURN_IF_ERROR(PlaceRanks(o.np, o.hosts).status());
  if (o.elastic()) {
    if (o.min_np == 0) o.min_np = std::min(o.np, o.max_np);
    if (o.max_np == 0) o.max_np = std::max(o.np, o.min_np);
    if (o.min_np > o.np || o.np > o.max_np) {
      return InvalidArgument("elastic mode needs --min-np <= -np <= --max-np (got " +
                             std::to_string(o.min_np) + ", " + std::to_string(o.np) + ", " +
                             std::to_string(o.max_np) + ")");
    }
    if (o.mpi) {
      return InvalidArgument(
          "elastic mode starts its workers itself: not with --mpi (an MPI "
          "job's world is fixed)");
    }
  }
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
