"""The executor boundary: a :class:`Call`, its :class:`Lost` outcome, the :class:`Executor`
interface and the ``--cluster`` spelling. Every executor imports this leaf."""

import secrets
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Call", "Lost", "Executor", "ClusterError", "parse_cluster"]


class ClusterError(RuntimeError):
    """The cluster cannot be used (scheduler unreachable, ``distributed`` missing): one line."""


@dataclass(frozen=True)
class Call:
    """One task: ``fn(*args)`` where it runs, then ``finish(value)`` in the runner.

    ``fn`` must be a module-level function (Dask pickles it by name);
    ``name`` is unique within a run and shows in the Dask dashboard.
    """
    name: str
    fn: Callable
    args: tuple = ()
    finish: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class Lost:
    """The result of a call that never returned: it raised, or its worker kept dying."""
    reason: str


class Executor:
    """Runs independent :class:`Call` s and reports each exactly once.

    Used as a context manager: entering it starts or reaches the workers (a
    cluster that cannot be reached raises :class:`ClusterError` there, before
    anything runs) and leaving it stops what it started.
    """

    #: True when calls may run on other machines (a cluster): results come back as data.
    remote = False
    #: A one-line remark for the run's header (the cluster's retry settings, say), or None.
    note = None

    def __init__(self):
        # Names this executor's tasks and processes apart from other runs' on shared workers.
        self.token = secrets.token_hex(4)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def describe(self):
        """Where the calls run, for the run's header line."""
        raise NotImplementedError

    def seed_call(self, task, folder):
        """The :class:`Call` that runs seed ``task`` and leaves its files in ``folder``.

        Its (finished) result is the seed's :class:`verif.regress.executor.seed.Outcome`.
        """
        raise NotImplementedError

    def run(self, calls, on_result, *, on_tick=None):
        """Run ``calls``; ``on_result(call, value)`` once for each, as each finishes.

        ``value`` is ``call.finish(fn(*args))`` (or ``fn(*args)``), or a
        :class:`Lost`. What ``on_result`` returns, if anything, are more calls to run
        (queued after those already waiting) before this returns: a regression's next
        round of seeds. ``on_tick(running, workers)`` is called at least once
        a second while calls are outstanding. Both callbacks run in the
        caller's thread. On ``KeyboardInterrupt`` the outstanding calls are
        cancelled and the running ones stopped, no more results are
        reported, and the interrupt propagates.
        """
        raise NotImplementedError


def parse_cluster(spec):
    """``("local", None)``, ``("local-cluster", N)`` or ``("scheduler", address)`` for ``--cluster``.

    ``None`` is the local executor; ``local:N`` a Dask ``LocalCluster`` of N
    worker processes started for the run; ``tcp://HOST:PORT`` (or
    ``tls://``) a running Dask scheduler.
    """
    if spec is None:
        return "local", None
    if not isinstance(spec, str):
        raise TypeError(f"cluster must be a string such as 'local:2' or 'tcp://host:8786', "
                        f"not {type(spec).__name__}")
    if spec.startswith("local:"):
        count = spec.removeprefix("local:")
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"--cluster {spec!r}: local:N needs a positive number of workers")
        return "local-cluster", int(count)
    scheme, _, rest = spec.partition("://")
    host, _, port = rest.rpartition(":")
    if scheme not in ("tcp", "tls") or not host or not port.isdigit():
        raise ValueError(f"--cluster {spec!r}: give local:N or a scheduler address "
                         f"tcp://HOST:PORT (or tls://HOST:PORT)")
    return "scheduler", spec
