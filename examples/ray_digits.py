"""The JAX digits example (examples/jax_digits.py) trained by Ray workers that
Hora connects: ``hora.ray.RayExecutor`` starts the workers as Ray actors and
wires Hora's rendezvous through them.

    python examples/ray_digits.py --num-workers 2 --check

Without --address the script starts a Ray instance of its own on this machine
(on 127.0.0.1) and stops it at the end; with --address it joins that cluster.
With --check it exits with status 1 when the final test accuracy is below 0.95.
"""

import argparse
import os
import sys

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
import ray  # noqa: E402

from hora.ray import RayExecutor  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def train(example, epochs):
    """Runs in each worker: the JAX example's training, its final accuracy."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("jax_digits", example)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.run(mod.parse_args(["--epochs", str(epochs), "--quiet"]))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--address", default=None, help="a running Ray cluster's address")
    p.add_argument("--check", action="store_true", help="exit 1 if final accuracy < 0.95")
    args = p.parse_args(argv)
    env = {"env_vars": {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}}
    if args.address:
        ray.init(address=args.address, runtime_env=env)
    else:
        ray.init(num_cpus=args.num_workers, _node_ip_address="127.0.0.1",
                 include_dashboard=False, runtime_env=env)
    try:
        executor = RayExecutor(RayExecutor.create_settings(timeout_s=120),
                               num_workers=args.num_workers)
        executor.start()
        accs = executor.run(train, args=[os.path.join(HERE, "jax_digits.py"), args.epochs])
        executor.shutdown()
    finally:
        ray.shutdown()
    acc = accs[0]
    ok = acc >= 0.95 and all(a == acc for a in accs)
    print("final test accuracy %.4f with %d Ray workers%s"
          % (acc, args.num_workers, "" if ok or not args.check else " (below 0.95 or unequal)"))
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
