"""Where a regression's tasks run: worker processes on this machine, or a Dask cluster.

The regression runner (:mod:`verif.regress.runner`) hands an :class:`Executor` a
list of :class:`Call` s (one per seed, or per slice of an exhaustive check)
and gets each one's result back exactly once, in its own thread, as soon as
it is ready. Two executors implement the boundary:

- :class:`verif.regress.executor.local.LocalExecutor` (``local``, the default):
  ``jobs`` threads, each running one seed's worker process at a time.
- :class:`verif.regress.executor.dask.DaskExecutor` (``--cluster local:N`` or
  ``--cluster tcp://host:8786``): one Dask task per call, on a
  ``LocalCluster`` started for the run or on a running scheduler.

:func:`open_executor` picks one from the command line's ``--cluster``.
"""

from verif.regress.executor.base import Call, ClusterError, Executor, Lost, parse_cluster

__all__ = ["Call", "Lost", "Executor", "ClusterError", "open_executor", "parse_cluster"]


def open_executor(cluster=None, *, jobs=1, connect_timeout=10.0):
    """The executor for ``--cluster`` (``None``: the local one with ``jobs`` workers).

    Not yet entered: use it in a ``with`` block.
    """
    kind, where = parse_cluster(cluster)
    if kind == "local":
        from verif.regress.executor.local import LocalExecutor
        return LocalExecutor(jobs=jobs)
    from verif.regress.executor.dask import DaskExecutor
    return DaskExecutor(local_workers=where if kind == "local-cluster" else None,
                        address=where if kind == "scheduler" else None,
                        connect_timeout=connect_timeout)
