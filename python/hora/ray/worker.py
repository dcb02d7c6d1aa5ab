"""One rank of a RayExecutor: an actor process that runs what it is given."""

import socket


class Worker:
    """A Ray actor's class (hora.ray wraps it with ray.remote)."""

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
        # function's init() starts a new Session.) One raised before init()
        # is marked so: the others cannot hear of it where they wait for
        # this rank in init(), and the driver ends them.
        try:
            return fn(*args, **kwargs)
        except BaseException as e:
            from hora.common import basics

            started = basics.is_initialized()
            basics.report_failure(type(e), e)
            basics.shutdown()
            if not started:
                try:
                    e.hora_raised_before_init = True
                except Exception:  # (an exception type without a __dict__)
                    pass
            raise
