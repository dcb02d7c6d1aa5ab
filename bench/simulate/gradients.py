"""Gradient sizes of real models, cached in gradients.json beside this file so
the simulator runs without torch.

    /usr/bin/python3 bench/simulate/gradients.py --refresh resnet18 resnet50 vgg16
    /usr/bin/python3 bench/simulate/gradients.py            # list what is cached

--refresh builds each torchvision model (random weights, float32), runs
forward + backward on a batch of random images on this CPU and records, per
parameter, its element count and when in backward its gradient was ready
(a tensor hook; as a fraction of backward time), plus the forward and
backward times. The fractions carry the layer-by-layer shape of backward
to other machines; the times are this CPU's, and simulate.py can override
them (--forward-ms, --backward-ms).

load(name) also accepts a path to a JSON file of its own: either this file's
per-model form, or a plain list of gradient sizes in bytes (then gradients
are taken as ready evenly through backward, in list order).
"""

import argparse
import json
import os
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(HERE, "gradients.json")


class GradientsError(RuntimeError):
    pass


def load(name, path=CACHE):
    """{"tensors": [{"name","bytes","ready_frac"}...], "forward_ms", "backward_ms", ...}"""
    if os.path.exists(name) and name.endswith(".json"):
        with open(name) as f:
            data = json.load(f)
        if isinstance(data, list):
            k = len(data)
            return {"name": os.path.basename(name), "forward_ms": None, "backward_ms": None,
                    "tensors": [{"name": "t%d" % i, "bytes": int(b), "ready_frac": (i + 1) / k}
                                for i, b in enumerate(data)]}
        return data
    if not os.path.exists(path):
        raise GradientsError("%s is missing; run gradients.py --refresh MODEL (needs torch)"
                             % path)
    with open(path) as f:
        models = json.load(f)["models"]
    if name not in models:
        raise GradientsError("model %r is not in %s (cached: %s); run gradients.py --refresh %s"
                             % (name, path, ", ".join(sorted(models)), name))
    return models[name]


def measure(name, batch, reps=2):
    import torch
    import torchvision
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None)
    model.train()
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    stamps = {}
    for pname, p in params:
        p.register_hook(lambda g, pname=pname: stamps.__setitem__(pname, time.perf_counter()))
    x = torch.randn(batch, 3, 224, 224)
    y = torch.randint(0, 1000, (batch,))
    loss_fn = torch.nn.CrossEntropyLoss()
    fwd, bwd, fracs = [], [], {}
    for rep in range(reps + 1):  # the first is a warm-up
        model.zero_grad()
        stamps.clear()
        t0 = time.perf_counter()
        loss = loss_fn(model(x), y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        if rep == 0:
            continue
        fwd.append(t1 - t0)
        bwd.append(t2 - t1)
        for pname, t in stamps.items():
            fracs.setdefault(pname, []).append((t - t1) / (t2 - t1))
    tensors = [{"name": pname, "bytes": 4 * p.numel(),
                "ready_frac": round(min(1.0, sum(fracs[pname]) / len(fracs[pname])), 5)}
               for pname, p in params]
    tensors.sort(key=lambda t: t["ready_frac"])
    return {"name": name, "source": "torchvision %s models.%s(weights=None), float32"
            % (torchvision.__version__, name),
            "batch_size": batch, "image": "3x224x224",
            "forward_ms": round(1e3 * min(fwd), 2), "backward_ms": round(1e3 * min(bwd), 2),
            "timed_on": "this machine's CPU (%d threads), min of %d steps"
            % (torch.get_num_threads(), reps),
            "params": sum(t["bytes"] for t in tensors) // 4, "tensors": tensors}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--refresh", nargs="*", metavar="MODEL", help="torchvision model names")
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args()
    data = {"models": {}}
    if os.path.exists(CACHE):
        with open(CACHE) as f:
            data = json.load(f)
    for name in args.refresh or []:
        print("measuring %s (batch %d) ..." % (name, args.batch), flush=True)
        data["models"][name] = measure(name, args.batch)
        with open(CACHE, "w") as f:
            json.dump(data, f, indent=0)
    for name, m in sorted(data["models"].items()):
        print("%-14s %4d tensors %8.1f MB  forward %7.1f ms  backward %7.1f ms (batch %d)"
              % (name, len(m["tensors"]), sum(t["bytes"] for t in m["tensors"]) / 1e6,
                 m["forward_ms"], m["backward_ms"], m["batch_size"]))


if __name__ == "__main__":
    main()
