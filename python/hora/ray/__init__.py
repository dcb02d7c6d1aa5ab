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
GPUs when ``use_gpu``), placed in the current placement group when there is
one (a Ray Tune trial's; ``use_current_placement_group=False``: not).
``start()`` places them (``num_workers``, or ``num_hosts`` x
``num_workers_per_host``), numbers them host by host, and gives each the
variables a launcher gives a rank (``HORA_RANK``, ``HORA_SIZE``, the local
and cross layout, each also as horovodrun's ``HOROVOD_*``, the rendezvous
address on rank 0's node with a port free there, and a fresh job secret),
so that ``init()`` inside the function finds the others. ``run`` calls a
function on every worker; ``execute`` calls it with the worker's executable
(``start(executable_cls=...)``); ``run_remote`` returns Ray's object refs;
``execute_single`` runs on rank 0 only. ``callbacks`` are taken and not
called, as by Horovod's RayExecutor outside elastic mode (a warning says
so).

A worker's failure raises Ray's error from ``run``, with a note naming its
rank (printed under the traceback): an exception in a worker's function
shuts Hora down in that worker, so that the others fail at once naming its
rank where they wait for it, and ``run`` and ``execute`` then shut it down
in every worker before raising that worker's error (not the others' reports
that it went), so that the next function's ``init()`` starts a new job
(``run_remote``'s caller does that itself). Workers found waiting in
``init()`` 2 s or more after a worker's function raised (say, it raised
before its own ``init()``) wait for a rank that will never come: every
worker is then ended and new ones started (as ``start()`` did,
executables made anew), and a note says so; workers busy otherwise are
waited for, up to ``timeout_s``. A worker
that died (Ray's ``RayActorError``: killed, out of memory) ends the others
at once too, which would wait for it (in ``init()`` or a collective) until
their timeouts: ``start()`` makes new ones. ``shutdown()`` ends Hora in
every worker, then the actors. With ``use_gpu`` each actor sees the GPUs
Ray gives it (``CUDA_VISIBLE_DEVICES``; Horovod's shows each every GPU of
its node): pick device 0 there, not ``local_rank()``.

Elastic training under Ray (Horovod's ``ElasticRayExecutor``, or
``RayExecutor`` with ``min_workers``/``max_workers``) is not supported:
those are refused with a NotImplementedError saying so; elastic jobs run
under ``horarun`` (docs/guide/elastic.md).
"""

import numbers
import secrets
import time
import warnings
from dataclasses import dataclass

from hora.ray.failures import add_note, root_cause
from hora.ray.worker import Board as _Board
from hora.ray.worker import Worker as _Worker


def _seconds(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError("RayExecutor: %s must be a number of seconds above 0, got %r"
                         % (what, value))
    return value


@dataclass
class Settings:
    """The executor's settings: ``timeout_s``, how long ``init()`` in each worker
    waits for the others (HORA_START_TIMEOUT_S); ``placement_group_timeout_s``,
    how long ``start()`` waits for Ray to place the workers."""

    timeout_s: int = 120
    placement_group_timeout_s: int = 100


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
    def create_settings(cls, timeout_s=120, ssh_identity_file=None, ssh_str=None,
                        placement_group_timeout_s=100, nics=None):
        """Horovod's factory: ``timeout_s`` and ``placement_group_timeout_s``
        (seconds above 0); Horovod's ssh and NIC settings have no use here
        (Ray reaches the nodes, Hora picks its interfaces) and are ignored."""
        del ssh_identity_file, ssh_str, nics
        return Settings(timeout_s=_seconds(timeout_s, "timeout_s"),
                        placement_group_timeout_s=_seconds(placement_group_timeout_s,
                                                           "placement_group_timeout_s"))

    def __init__(self, settings=None, num_workers=None, num_hosts=None,
                 num_workers_per_host=1, cpus_per_worker=1, use_gpu=False, gpus_per_worker=None,
                 use_current_placement_group=True, min_workers=None, max_workers=None,
                 reset_limit=None, cooldown_range=None, elastic_timeout=1200,
                 override_discovery=True):
        del elastic_timeout, override_discovery  # (elastic only, as in Horovod)
        elastic = sorted(k for k, v in (("min_workers", min_workers),
                                        ("max_workers", max_workers),
                                        ("reset_limit", reset_limit),
                                        ("cooldown_range", cooldown_range)) if v is not None)
        if elastic:
            raise NotImplementedError(_NO_ELASTIC % ("RayExecutor(%s=...)" % "=..., ".join(elastic)))
        if num_workers is None and num_hosts is None:
            raise ValueError("RayExecutor: give num_workers, or num_hosts (with "
                             "num_workers_per_host)")
        if num_workers is not None and num_hosts is not None:
            raise ValueError("RayExecutor: num_workers and num_hosts exclude each other")
        if num_hosts is not None and num_workers_per_host is None:
            num_workers_per_host = 1  # (older Horovod's default)
        for name, value in (("num_workers", num_workers), ("num_hosts", num_hosts),
                            ("num_workers_per_host", num_workers_per_host)):
            if value is not None and (isinstance(value, bool) or
                                      not isinstance(value, numbers.Integral) or value < 1):
                raise ValueError("RayExecutor: %s must be a whole number of at least 1, got %r"
                                 % (name, value))
        if isinstance(cpus_per_worker, bool) or not isinstance(cpus_per_worker, numbers.Real) \
                or cpus_per_worker < 0:
            raise ValueError("RayExecutor: cpus_per_worker must be a number of CPUs of at "
                             "least 0, got %r" % (cpus_per_worker,))
        if gpus_per_worker and not use_gpu:
            raise ValueError("RayExecutor: gpus_per_worker=%r needs use_gpu=True"
                             % (gpus_per_worker,))
        if use_gpu and gpus_per_worker is not None and not gpus_per_worker >= 1:
            raise ValueError("RayExecutor: gpus_per_worker must be at least 1 with use_gpu, "
                             "got %r" % (gpus_per_worker,))
        self.settings = settings or Settings()
        _seconds(self.settings.timeout_s, "settings.timeout_s")
        _seconds(self.settings.placement_group_timeout_s, "settings.placement_group_timeout_s")
        self.num_workers = int(num_workers if num_workers is not None else
                               num_hosts * num_workers_per_host)
        self.num_hosts = num_hosts
        self.num_workers_per_host = num_workers_per_host
        self.cpus_per_worker = cpus_per_worker
        self.gpus_per_worker = (gpus_per_worker or 1) if use_gpu else 0
        self.use_current_placement_group = use_current_placement_group
        self.workers = []
        self._ips = []
        self._start_args = None
        self._placement_group = None
        self._board = None

    def _placement(self):
        """Ray's placement of each worker: in the current placement group
        (a Ray Tune trial's) if there is one and use_current_placement_group,
        else one host's workers together (num_hosts), else none."""
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        current = ray.util.get_current_placement_group() \
            if self.use_current_placement_group else None
        if current is not None:
            return [{"scheduling_strategy": PlacementGroupSchedulingStrategy(current)}
                    for _ in range(self.num_workers)]
        if self.num_hosts is None:
            # (DEFAULT: out of a placement group that captures child tasks.)
            return [{"scheduling_strategy": "DEFAULT"} for _ in range(self.num_workers)]
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
                               "%s s" % (self.num_hosts, bundle,
                                         self.settings.placement_group_timeout_s))
        return [{"scheduling_strategy": PlacementGroupSchedulingStrategy(
            self._placement_group, placement_group_bundle_index=i // self.num_workers_per_host)}
            for i in range(self.num_workers)]

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None,
              extra_env_vars=None):
        """Starts the workers and gives each its rank's variables (see the module)."""
        import ray

        self._start_args = dict(executable_cls=executable_cls, executable_args=executable_args,
                                executable_kwargs=executable_kwargs,
                                extra_env_vars=extra_env_vars)
        actor = ray.remote(_Worker)
        self._board = ray.remote(_Board).options(num_cpus=0,
                                                 scheduling_strategy="DEFAULT").remote()
        self.workers = [actor.options(num_cpus=self.cpus_per_worker,
                                      num_gpus=self.gpus_per_worker, **where).remote()
                        for where in self._placement()]
        try:
            ips = ray.get([w.node_ip.remote() for w in self.workers],
                          timeout=self.settings.placement_group_timeout_s)
        except ray.exceptions.GetTimeoutError:
            self.shutdown(graceful=False)  # (none of them started: nothing to end)
            raise TimeoutError("RayExecutor.start: Ray did not start %d workers of %s CPU(s) "
                               "and %s GPU(s) each within %s s (placement_group_timeout_s); "
                               "does the cluster have them?"
                               % (self.num_workers, self.cpus_per_worker, self.gpus_per_worker,
                                  self.settings.placement_group_timeout_s)) from None
        # Ranks host by host, in the order hosts first appear.
        hosts = list(dict.fromkeys(ips))
        order = sorted(range(len(ips)), key=lambda i: (hosts.index(ips[i]), i))
        self.workers = [self.workers[i] for i in order]
        ips = [ips[i] for i in order]
        self._ips = ips
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
        ray.get([w.set_env.remote(e, self._board, rank)
                 for rank, (w, e) in enumerate(zip(self.workers, envs))])
        if executable_cls is not None:
            ray.get([w.start_executable.remote(executable_cls, executable_args,
                                               executable_kwargs) for w in self.workers])

    def _started(self, what):
        if not self.workers:
            raise RuntimeError("RayExecutor.%s: call start() first" % what)

    @staticmethod
    def _no_callbacks(what, callbacks):
        if callbacks:
            warnings.warn("RayExecutor.%s: callbacks are not called (as by Horovod's "
                          "RayExecutor outside elastic mode: only its elastic executor logs "
                          "values to them)" % what, stacklevel=3)

    def run_remote(self, fn, args=None, kwargs=None, callbacks=None):
        """Starts ``fn(*args, **kwargs)`` on every worker; returns Ray's object refs."""
        self._started("run_remote")
        self._no_callbacks("run_remote", callbacks)
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
            stuck = []
            if not dead:
                stuck = self._end_sessions()
            cause, rank = root_cause(refs)
            err = first if cause is None else cause
            if rank is not None:
                add_note(err, "hora.ray: %s rank %d of %d (on %s)%s" % (
                    "the worker of" if isinstance(err, ray.exceptions.RayActorError) else "by",
                    rank, len(self._ips), self._ips[rank],
                    " died" if isinstance(err, ray.exceptions.RayActorError) else ""))
            if dead or isinstance(cause, ray.exceptions.RayActorError):
                # A worker is gone: the others would wait for it until their
                # timeouts, and the job cannot go on without it.
                self.shutdown(graceful=False)
            elif stuck:
                add_note(err, self._restart(stuck))
            if err is first:
                raise
            raise err from None

    def _end_sessions(self):
        """After a worker's function raised: ends Hora in every worker once
        its function returns, waiting up to timeout_s; the ranks found
        waiting in init() 2 s on or later (the one that raised will never
        join them there: say, it raised before its own init()), at once;
        [] once every worker ended or the time is up."""
        import ray

        ends = [w.end_session.remote() for w in self.workers]
        now = time.monotonic()
        deadline, look_from = now + self.settings.timeout_s, now + 2
        while True:
            _, pending = ray.wait(ends, num_returns=len(ends),
                                  timeout=max(0.0, min(0.5, deadline - time.monotonic())))
            now = time.monotonic()
            if not pending or now >= deadline:
                return []
            if now < look_from or self._board is None:
                continue
            try:
                starting = set(ray.get(self._board.starting.remote(), timeout=5))
            except Exception:  # (the board gone: nothing to learn)
                starting = set()
            stuck = [r for r, e in enumerate(ends) if e in pending and r in starting]
            if stuck:
                return stuck

    def _restart(self, stuck):
        """Ends the workers (`stuck` wait in init() for one that will never
        come) and starts new ones as start() did; what happened, as a note."""
        args = self._start_args
        self.shutdown(graceful=False)
        waited = "rank%s %s waited for it in init()" % (
            "s" if len(stuck) > 1 else "", ", ".join(str(r) for r in stuck))
        try:
            self.start(**args)
        except BaseException as e:
            self.shutdown(graceful=False)
            if not isinstance(e, Exception):
                raise
            return ("hora.ray: %s: every worker was ended, and new ones could not start (%s: "
                    "%s); call start()" % (waited, type(e).__name__, e))
        return ("hora.ray: %s: every worker was ended and new ones started (their executables "
                "made anew)" % waited)

    def run(self, fn, args=None, kwargs=None, callbacks=None):
        """``fn(*args, **kwargs)`` on every worker; the results in rank order.
        ``callbacks`` are taken, and not called (see the module)."""
        self._started("run")
        self._no_callbacks("run", callbacks)
        return self._get_all(self.run_remote(fn, args, kwargs))

    def execute(self, fn, callbacks=None):
        """``fn(executable)`` on every worker; the results in rank order."""
        self._started("execute")
        self._no_callbacks("execute", callbacks)
        return self._get_all([w.execute.remote(fn) for w in self.workers])

    def execute_single(self, fn):
        """``fn(executable)`` on rank 0 only."""
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
        if self._board is not None:
            ray.kill(self._board)
            self._board = None
        if self._placement_group is not None:
            ray.util.remove_placement_group(self._placement_group)
            self._placement_group = None
