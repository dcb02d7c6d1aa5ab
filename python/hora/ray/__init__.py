"""Ray as a cluster engine: ``hora.ray.RayExecutor``, with Horovod's names.

::

    import ray
    from hora.ray import RayExecutor

    ray.init()
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), num_workers=4)
    executor.start()
    def train(lr):
        import hora.torch as hvd
        hvd.init()
        ...
        return hvd.rank()
    print(executor.run(train, args=[0.1]))   # one result per worker, in rank order
    executor.shutdown()

Each worker is a Ray actor (``cpus_per_worker`` CPUs, ``gpus_per_worker``
GPUs when ``use_gpu``). ``start()`` places them (``num_workers``, or
``num_hosts`` x ``num_workers_per_host``), numbers them host by host, and
gives each the variables a launcher gives a rank (``HORA_RANK``,
``HORA_SIZE``, the local and cross layout, each also as horovodrun's
``HOROVOD_*``, the rendezvous address on rank 0's node with a port free
there, and a fresh job secret), so that ``init()`` inside the function
finds the others. ``run`` calls a function on every
worker; ``execute`` calls it with the worker's executable (``start(
executable_cls=...)``); ``run_remote`` returns Ray's object refs;
``execute_single`` runs on rank 0 only. A worker's failure raises Ray's
error from ``run``: an exception in a worker's function shuts Hora down in
that worker, so that the others fail at once naming its rank where they
wait for it, and ``run`` and ``execute`` then shut it down in every worker
before raising that worker's error (not the others' reports that it went),
so that the next function's ``init()`` starts a new job (``run_remote``'s
caller does that itself). A worker that died (Ray's
``RayActorError``: killed, out of memory) ends the others at once too, which
would wait for it (in ``init()`` or a collective) until their timeouts:
``start()`` makes new ones. ``shutdown()`` ends Hora in every worker, then
the actors. With ``use_gpu`` each
actor sees the GPUs Ray gives it (``CUDA_VISIBLE_DEVICES``): pick device 0
there, not ``local_rank()``.

Elastic training under Ray (Horovod's ``ElasticRayExecutor``, or
``RayExecutor`` with ``min_workers``/``max_workers``) is not supported:
those are refused with a NotImplementedError saying so; elastic jobs run
under ``horarun`` (docs/guide/elastic.md).
"""

import re
import secrets
import socket
from dataclasses import dataclass


@dataclass
class Settings:
    """The executor's settings: ``timeout_s``, how long ``init()`` in each worker
    waits for the others (HORA_START_TIMEOUT_S); ``placement_group_timeout_s``,
    how long ``start()`` waits for Ray to place the workers."""

    timeout_s: int = 120
    placement_group_timeout_s: int = 100


class _Worker:
    """One rank: an actor process that runs what it is given."""

    def __init__(self):
        self.executable = None

    def node_ip(self):
        import ray

        return ray.util.get_node_ip_address()

    def free_port(self):
        with socket.socket() as s:
            s.bind(("", 0))
            return s.getsockname()[1]

    def set_env(self, env):
        import os

        os.environ.update(env)

    def start_executable(self, cls, args, kwargs):
        self.executable = cls(*(args or ()), **(kwargs or {}))

    def run(self, fn, args, kwargs):
        return self._call(fn, *(args or ()), **(kwargs or {}))

    def execute(self, fn):
        return self._call(fn, self.executable)

    def end_session(self):
        from hora.common import basics

        basics.shutdown()

    @staticmethod
    def _call(fn, *args, **kwargs):
        # An exception ends this rank's part: Ray keeps the actor (and its
        # Session) alive, so Hora is shut down here, as an uncaught exception
        # does in a process, and the other ranks fail at once naming this
        # one instead of waiting for it in their next collective. (The next
        # function's init() starts a new Session.)
        try:
            return fn(*args, **kwargs)
        except BaseException as e:
            from hora.common import basics

            basics.report_failure(type(e), e)
            basics.shutdown()
            raise


def _root_cause(refs):
    """The first failure (in rank order) of a worker that died or failed on
    its own, not because another did (a Hora error naming a lost or
    shut-down peer); None when none has finished so."""
    import ray

    ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0)
    ready = set(ready)
    for ref in refs:
        if ref not in ready:
            continue
        try:
            ray.get(ref)
        except ray.exceptions.RayActorError as e:
            return e
        except ray.exceptions.RayTaskError as e:
            if not _peer_caused(e):
                return e
        except Exception:
            continue
    return None


# Hora's errors for a peer that went, as Python prints them (their
# messages begin with the rank that raised them); a framework that re-raises
# them as its own (JAX inside jit: JaxRuntimeError; TensorFlow graphs:
# UnknownError) keeps this text.
_PEER_ERROR = re.compile(r"\b(UnavailableError|AbortedError): rank \d+")


def _peer_caused(err):
    """Whether the worker's error `err` (Ray's wrapper) is a Hora error a
    peer's loss or end caused."""
    cause = getattr(err, "cause", None)
    if type(cause).__name__ in ("UnavailableError", "AbortedError") and \
            type(cause).__module__.startswith("hora"):
        return True
    text = str(cause) if cause is not None else str(err)
    return _PEER_ERROR.search(text) is not None


_NO_ELASTIC = ("%s: elastic training under Ray is not supported by Hora; run an elastic job "
               "with horarun (--min-np, --max-np, --host-discovery-script: "
               "docs/guide/elastic.md), or give RayExecutor a fixed num_workers")


class ElasticRayExecutor:
    """Horovod's elastic executor for Ray: not supported (see the module)."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(_NO_ELASTIC % "ElasticRayExecutor")

    @classmethod
    def create_settings(cls, *args, **kwargs):
        raise NotImplementedError(_NO_ELASTIC % "ElasticRayExecutor.create_settings")


class RayExecutor:
    """Starts ``num_workers`` Hora workers as Ray actors and runs functions on them."""

    @classmethod
    def create_settings(cls, timeout_s=120, placement_group_timeout_s=100, **unused):
        """Horovod's factory; settings Hora has no use for are accepted and ignored."""
        del unused
        return Settings(timeout_s=timeout_s, placement_group_timeout_s=placement_group_timeout_s)

    def __init__(self, settings=None, num_workers=None, num_hosts=None,
                 num_workers_per_host=1, cpus_per_worker=1, use_gpu=False, gpus_per_worker=None,
                 **unused):
        elastic = sorted(k for k in ("min_workers", "max_workers", "reset_limit",
                                     "cooldown_range") if unused.get(k) is not None)
        if elastic:
            raise NotImplementedError(_NO_ELASTIC % ("RayExecutor(%s=...)" % "=..., ".join(elastic)))
        if num_workers is None and num_hosts is None:
            raise ValueError("RayExecutor: give num_workers, or num_hosts (with "
                             "num_workers_per_host)")
        if num_workers is not None and num_hosts is not None:
            raise ValueError("RayExecutor: num_workers and num_hosts exclude each other")
        self.settings = settings or Settings()
        self.num_workers = num_workers if num_workers is not None else \
            num_hosts * num_workers_per_host
        if self.num_workers < 1:
            raise ValueError("RayExecutor: %d workers; at least 1 is needed" % self.num_workers)
        self.num_hosts = num_hosts
        self.num_workers_per_host = num_workers_per_host
        self.cpus_per_worker = cpus_per_worker
        self.gpus_per_worker = (gpus_per_worker or 1) if use_gpu else 0
        self.workers = []
        self._placement_group = None

    def _placement(self):
        """Ray's placement for one host's workers together (num_hosts), or none."""
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        if self.num_hosts is None:
            return [{} for _ in range(self.num_workers)]
        bundle = {"CPU": self.cpus_per_worker * self.num_workers_per_host}
        if self.gpus_per_worker:
            bundle["GPU"] = self.gpus_per_worker * self.num_workers_per_host
        self._placement_group = placement_group([bundle] * self.num_hosts,
                                                strategy="STRICT_SPREAD")
        ready = self._placement_group.ready()
        if not ray.wait([ready], timeout=self.settings.placement_group_timeout_s)[0]:
            # (Not left pending: it would take the cluster's resources once
            # they free up.)
            ray.util.remove_placement_group(self._placement_group)
            self._placement_group = None
            raise TimeoutError("RayExecutor.start: Ray could not place %d hosts of %s within "
                               "%d s" % (self.num_hosts, bundle,
                                         self.settings.placement_group_timeout_s))
        return [{"scheduling_strategy": PlacementGroupSchedulingStrategy(
            self._placement_group, placement_group_bundle_index=i // self.num_workers_per_host)}
            for i in range(self.num_workers)]

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None,
              extra_env_vars=None):
        """Starts the workers and gives each its rank's variables (see the module)."""
        import ray

        actor = ray.remote(_Worker)
        self.workers = [actor.options(num_cpus=self.cpus_per_worker,
                                      num_gpus=self.gpus_per_worker, **where).remote()
                        for where in self._placement()]
        try:
            ips = ray.get([w.node_ip.remote() for w in self.workers],
                          timeout=self.settings.placement_group_timeout_s)
        except ray.exceptions.GetTimeoutError:
            self.shutdown()
            raise TimeoutError("RayExecutor.start: Ray did not start %d workers of %s CPU(s) "
                               "and %s GPU(s) each within %d s (placement_group_timeout_s); "
                               "does the cluster have them?"
                               % (self.num_workers, self.cpus_per_worker, self.gpus_per_worker,
                                  self.settings.placement_group_timeout_s)) from None
        # Ranks host by host, in the order hosts first appear.
        hosts = list(dict.fromkeys(ips))
        order = sorted(range(len(ips)), key=lambda i: (hosts.index(ips[i]), i))
        self.workers = [self.workers[i] for i in order]
        ips = [ips[i] for i in order]
        port = ray.get(self.workers[0].free_port.remote())
        secret = secrets.token_hex(16)
        envs = []
        for rank, ip in enumerate(ips):
            local = [r for r, x in enumerate(ips) if x == ip]
            layout = {"RANK": rank, "SIZE": len(ips), "LOCAL_RANK": local.index(rank),
                      "LOCAL_SIZE": len(local), "CROSS_RANK": hosts.index(ip),
                      "CROSS_SIZE": len(hosts), "HOSTNAME": ip}
            # (Each as HORA_* and, as horovodrun and horarun export it, HOROVOD_*.)
            env = {p + k: v for k, v in layout.items() for p in ("HORA_", "HOROVOD_")}
            env.update({"HORA_STORE_ADDR": "%s:%d" % (ips[0], port),
                        "HORA_STORE_SERVER": "rank0", "HORA_SECRET": secret,
                        "HORA_START_TIMEOUT_S": self.settings.timeout_s})
            env.update(extra_env_vars or {})
            envs.append({k: str(v) for k, v in env.items()})
        ray.get([w.set_env.remote(e) for w, e in zip(self.workers, envs)])
        if executable_cls is not None:
            ray.get([w.start_executable.remote(executable_cls, executable_args,
                                               executable_kwargs) for w in self.workers])

    def _started(self, what):
        if not self.workers:
            raise RuntimeError("RayExecutor.%s: call start() first" % what)

    def run_remote(self, fn, args=None, kwargs=None):
        """Starts ``fn(*args, **kwargs)`` on every worker; returns Ray's object refs."""
        self._started("run_remote")
        return [w.run.remote(fn, args, kwargs) for w in self.workers]

    def _get_all(self, refs):
        """The workers' results; where one raised, Hora is shut down in every
        worker (the others' Sessions lost a rank) before the error goes on, so
        that the next function's ``init()`` starts a new job on every worker."""
        import ray

        try:
            pending = list(refs)
            while pending:  # (the first failure as soon as Ray knows it, in any rank)
                ready, pending = ray.wait(pending, num_returns=1)
                ray.get(ready)
            return ray.get(refs)
        except KeyboardInterrupt:
            # (Queued behind what still runs: not waited for, the user wants out.)
            for w in self.workers:
                w.end_session.remote()
            raise
        except BaseException as first:
            dead = isinstance(first, ray.exceptions.RayActorError)
            if not dead:
                ends = [w.end_session.remote() for w in self.workers]
                ray.wait(ends, num_returns=len(ends), timeout=self.settings.timeout_s)
            cause = _root_cause(refs)
            if dead or isinstance(cause, ray.exceptions.RayActorError):
                # A worker is gone: the others would wait for it until their
                # timeouts, and the job cannot go on without it.
                self.shutdown(graceful=False)
            if cause is None or cause is first:
                raise
            raise cause from None

    def run(self, fn, args=None, kwargs=None):
        """``fn(*args, **kwargs)`` on every worker; the results in rank order."""
        return self._get_all(self.run_remote(fn, args, kwargs))

    def execute(self, fn):
        """``fn(executable)`` on every worker; the results in rank order."""
        self._started("execute")
        return self._get_all([w.execute.remote(fn) for w in self.workers])

    def execute_single(self, fn):
        """``fn(executable)`` on rank 0 only."""
        import ray

        self._started("execute_single")
        # (An exception there ends rank 0's Session: the others' go too.)
        return self._get_all([self.workers[0].execute.remote(fn)])[0]

    def shutdown(self, graceful=True):
        """Ends Hora in every worker (as a process that returns does: the
        others are not told a rank was lost), then the workers; ``graceful``
        False, or a worker still busy after 10 s: the workers alone."""
        import ray

        if graceful and self.workers:
            ends = [w.end_session.remote() for w in self.workers]
            ray.wait(ends, num_returns=len(ends), timeout=10)
        for w in self.workers:
            ray.kill(w)
        self.workers = []
        if self._placement_group is not None:
            ray.util.remove_placement_group(self._placement_group)
            self._placement_group = None
