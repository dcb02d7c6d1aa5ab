"""Runs one command under horarun on namespaced hosts (one rank per host, or
--per-host ranks on each).

    /usr/bin/python3 bench/simulate/on_netns.py --hosts 2 [--per-host 2] [--rate 30mbit] \\
        [--burst 4kb] -- COMMAND...

The testbed of calibrate.py and validate.py (netns.NamespacedHosts: a bridge,
one network namespace per host, each link shaped by tc tbf to --rate), for a
measurement of one's own. Root only. For example, a one-way transfer against
an exchange of the same message:

    /usr/bin/python3 bench/simulate/on_netns.py --hosts 2 -- \\
        build/bin/hora-bench broadcast --sizes 384K:3M --iters 4 --warmup 1
    HORA_ALLREDUCE_ALGO=recursive_doubling /usr/bin/python3 bench/simulate/on_netns.py \\
        --hosts 2 -- build/bin/hora-bench allreduce --sizes 384K:3M --iters 4 --warmup 1

HORA_* variables of the caller reach every rank (horarun forwards them).
"""

import argparse
import signal
import subprocess
import sys

import hora_runs
import netns


def run_until_stopped(argv, grace_s=10):
    """Runs argv in the caller's directory and returns its exit code. When
    this script is stopped (Ctrl-C, SIGTERM), horarun gets SIGTERM and up to
    grace_s seconds to stop its ranks before the namespaces go."""
    p = subprocess.Popen(argv)
    try:
        return p.wait()
    except BaseException:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        raise


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, required=True)
    ap.add_argument("--per-host", type=int, default=1, help="ranks on each host")
    ap.add_argument("--rate", default="30mbit", help="tbf rate of each host's link ('' unshaped)")
    ap.add_argument("--burst", default=netns.NamespacedHosts.BURST, help="tbf bucket size")
    ap.add_argument("--timeout", type=int, default=60, help="horarun --timeout (seconds)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no command given (after --)")
    if a.hosts < 1 or a.per_host < 1:
        ap.error("--hosts and --per-host must be at least 1")
    netns.install_signal_exit()
    try:
        with netns.NamespacedHosts(a.hosts, rate=a.rate or None, burst=a.burst) as hosts:
            argv = hora_runs.horarun(a.hosts * a.per_host, cmd, hosts=hosts, wait_s=a.timeout)
            rc = run_until_stopped(argv)
    except netns.NetnsError as e:
        sys.exit("on_netns.py: %s" % e)
    sys.exit(rc)


if __name__ == "__main__":
    main()
