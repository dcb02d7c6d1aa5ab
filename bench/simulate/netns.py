"""Several "hosts" on one machine: network namespaces joined by veth pairs to a
bridge, each host's link optionally shaped with tc tbf (bandwidth only).

    with NamespacedHosts(4, rate="200mbit") as hosts:
        horarun(... "-H", hosts.host_list(per_host=1), "--rsh", "ip netns exec",
                "--bind", hosts.bind ...)

Each namespace gets one veth pair into a bridge in this namespace. With a rate,
a tbf qdisc shapes both directions of every host link (egress of the bridge
side and of eth0 inside the namespace), so each host has a full-duplex link of
that rate into an unshaped switch, the usual alpha-beta picture.

Delay cannot be added: this kernel has no netem qdisc, so latency is whatever
the veth + bridge path costs (the calibration measures it as alpha).

The bucket is small (4 KiB by default, about three packets) so that messages
see the rate: tbf passes what the bucket holds at veth speed, and refills it
while the link idles, a token-bucket effect the alpha-beta model does not
have (with 16 KiB, 12-48 KiB allreduces on 8 hosts at 30 Mbit/s beat the
link time by 7-23%; see docs/benchmarks.md). TCP's
slow start after idle is turned off in each namespace (otherwise every
iteration would restart from a small window).

Needs root (CAP_NET_ADMIN). Names carry this process's pid (hsim<pid>-<i>,
bridge hsb<pid>), the subnet is one of 10.233.x.0/24 not in use here, every
command has a timeout, and everything is removed on exit, on an exception and
on SIGTERM/SIGHUP (install_signal_exit). remove_stale() deletes what a killed
run (a pid no longer alive) left behind.
"""

import os
import random
import re
import signal
import subprocess

PREFIX = "hsim"


class NetnsError(RuntimeError):
    pass


def _ip(args, timeout=15, check=True):
    argv = list(args)
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise NetnsError("'%s' did not finish in %ds" % (" ".join(argv), timeout))
    except FileNotFoundError:
        raise NetnsError("'%s' not found (iproute2 needed for namespaced hosts)" % argv[0])
    if check and p.returncode != 0:
        raise NetnsError("'%s' failed (exit %d): %s" % (" ".join(argv), p.returncode,
                                                        p.stderr.strip()))
    return p.stdout


def install_signal_exit():
    """Turn SIGTERM/SIGHUP into SystemExit so `finally` blocks clean up."""
    def handler(signum, _frame):
        raise SystemExit("stopped by signal %d" % signum)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, handler)


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale():
    """Deletes namespaces and bridges of earlier runs whose process is gone."""
    removed = []
    for line in _ip(["ip", "netns", "list"], check=False).splitlines():
        m = re.match(r"(%s(\d+)-\d+)\b" % PREFIX, line)
        if m and not _pid_alive(int(m.group(2))):
            _ip(["ip", "netns", "del", m.group(1)], check=False)
            removed.append(m.group(1))
    for line in _ip(["ip", "-o", "link", "show", "type", "bridge"], check=False).splitlines():
        m = re.search(r"\d+: (hsb(\d+))[:@]", line)
        if m and not _pid_alive(int(m.group(2))):
            _ip(["ip", "link", "del", m.group(1)], check=False)
            removed.append(m.group(1))
    return removed


def _free_subnet():
    used = set(re.findall(r"inet 10\.233\.(\d+)\.", _ip(["ip", "-4", "addr"], check=False)))
    free = [x for x in range(1, 251) if str(x) not in used]
    if not free:
        raise NetnsError("no free 10.233.x.0/24 subnet")
    return random.choice(free)


class NamespacedHosts:
    """`hosts` namespaces on one bridge; rate e.g. "200mbit" (None: unshaped)."""

    BURST = "4kb"

    def __init__(self, hosts, rate=None, burst=BURST):
        if os.geteuid() != 0:
            raise NetnsError("namespaced hosts need root (CAP_NET_ADMIN)")
        self.n = hosts
        self.rate = rate
        self.burst = burst
        tag = os.getpid()
        self.names = ["%s%d-%d" % (PREFIX, tag, i) for i in range(1, hosts + 1)]
        self.veths = ["hsv%d-%d" % (tag, i) for i in range(1, hosts + 1)]
        self.bridge = "hsb%d" % tag
        self.bind = None
        self._made = False

    def __enter__(self):
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _create(self):
        remove_stale()
        self._made = True
        net = _free_subnet()
        self.bind = "10.233.%d.254" % net
        _ip(["ip", "link", "add", self.bridge, "type", "bridge"])
        _ip(["ip", "addr", "add", self.bind + "/24", "dev", self.bridge])
        _ip(["ip", "link", "set", self.bridge, "up"])
        for i, (ns, veth) in enumerate(zip(self.names, self.veths), start=1):
            _ip(["ip", "netns", "add", ns])
            _ip(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
            _ip(["ip", "link", "set", veth, "master", self.bridge, "up"])
            _ip(["ip", "-n", ns, "addr", "add", "10.233.%d.%d/24" % (net, i), "dev", "eth0"])
            _ip(["ip", "-n", ns, "link", "set", "eth0", "up"])
            _ip(["ip", "-n", ns, "link", "set", "lo", "up"])
            # Keep TCP's window across the idle gaps between iterations, so a
            # message's time is latency + bytes / rate (not a new slow start).
            _ip(["ip", "netns", "exec", ns, "sysctl", "-qw",
                 "net.ipv4.tcp_slow_start_after_idle=0"])
            if self.rate:
                tbf = ["root", "tbf", "rate", self.rate, "burst", self.burst, "latency", "200ms"]
                _ip(["tc", "qdisc", "add", "dev", veth] + tbf)
                _ip(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0"] + tbf)

    def host_list(self, per_host=1):
        return ",".join("%s:%d" % (ns, per_host) for ns in self.names)

    def horarun_flags(self, per_host=1):
        return ["-H", self.host_list(per_host), "--rsh", "ip netns exec", "--bind", self.bind]

    def close(self):
        if not self._made:
            return
        for ns in self.names:
            _ip(["ip", "netns", "del", ns], check=False)
        _ip(["ip", "link", "del", self.bridge], check=False)
        self._made = False
