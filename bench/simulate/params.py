"""Simulator parameters: links and control-plane constants from calib.json
(written by calibrate.py), or "builtin" values that are not measured.

    load("bench/results/calib.json", intra="shm", inter="netns")
        -> (Topology-less dict {"intra": Link, "inter": Link, "control":
            ControlParams, "source": str})

Builtin: intra = Hora's own cost-model defaults (HORA_COST_ALPHA_US=2,
HORA_COST_BANDWIDTH_GBPS=8, HORA_COST_REDUCE_GBPS=10); inter = a nominal
10 Gbit/s Ethernet (25 us, 1.25 GB/s; also the defaults of HORA_COST_NET_ALPHA_US
and HORA_COST_NET_BANDWIDTH_GBPS). Use them only to try the simulator.
"""

import json
import os

import control
from costs import Link

BUILTIN = {"intra": Link(2e-6, 1 / 8e9, 1 / 10e9), "inter": Link(25e-6, 1 / 1.25e9, 1 / 10e9)}


class ParamsError(RuntimeError):
    pass


def load(path, intra="shm", inter="netns"):
    if path == "builtin":
        return {"intra": BUILTIN["intra"], "inter": BUILTIN["inter"],
                "control": control.ControlParams(), "source": "builtin (not measured)",
                "names": {"intra": "builtin intra", "inter": "builtin inter"}}
    if not os.path.exists(path):
        raise ParamsError("%s does not exist: run bench/simulate/calibrate.py first, or pass "
                          "--params builtin" % path)
    with open(path) as f:
        calib = json.load(f)
    links = calib.get("links", {})
    out = {"source": "%s (%s)" % (path, calib.get("created", "?")), "names": {}}
    for role, want in (("intra", intra), ("inter", inter)):
        if want not in links:
            raise ParamsError("%s has no %r link (it has: %s); calibrate it or choose another "
                              "with --%s" % (path, want, ", ".join(sorted(links)) or "none",
                                             role))
        p = links[want]
        out[role] = Link(p["alpha"], p["beta"], p["gamma"])
        out["names"][role] = want
    c = calib.get("control", {})
    kw = {k: float(c[k]) for k in ("request_bytes", "response_bytes", "per_request_s",
                                          "per_tensor_s", "engine_per_tensor_s")
          if c.get(k) is not None}
    out["control"] = control.ControlParams(**kw)
    return out
