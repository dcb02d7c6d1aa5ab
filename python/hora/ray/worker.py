"""One rank of a RayExecutor: an actor process that runs what it is given;
and the board where workers say that they wait in init()."""

import socket


class Board:
    """A Ray actor's class: which ranks are starting a Session (in init())
    now, as the workers say it; the driver reads it."""

    def __init__(self):
        self.ranks = set()

    def mark(self, rank, starting):
        (self.ranks.add if starting else self.ranks.discard)(rank)

    def starting(self):
        return sorted(self.ranks)


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

    def set_env(self, env, board=None, rank=None):
        import os

        from hora.common import basics

        os.environ.update(env)
        basics.starting_listeners[:] = [
            listener for listener in basics.starting_listeners
            if not getattr(listener, "hora_ray", False)]
        if board is not None:
            def listener(starting):
                try:
                    board.mark.remote(rank, starting)
                except Exception:  # (the board gone: the executor shut down)
                    pass
            listener.hora_ray = True
            basics.starting_listeners.append(listener)

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
