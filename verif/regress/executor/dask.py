"""The Dask executor: each seed, or slice of an exhaustive check, is one Dask task.

The tasks go to a running scheduler (``--cluster tcp://host:8786``), or to a
``LocalCluster`` of N single-threaded worker processes started for the run
(``--cluster local:N``). On a worker, a seed runs the same worker process
as locally (:func:`verif.regress.executor.seed.run_seed`), in the worker's scratch
space, and the task returns its outcome with the files the reports are
merged from; the runner writes them where a local run would have.

Faults:

- A task whose worker dies is rescheduled by the scheduler on another
  worker; when that one dies too, the future fails with ``KilledWorker``
  and the seed is reported as a crash. That is one retry when the
  scheduler's ``distributed.scheduler.allowed-failures`` is 1, and only the
  running task is charged when its ``worker-saturation`` is 1.0
  (:data:`RETRY_CONFIG`: set for ``local:N``; for another scheduler the
  run's header notes any difference). A task that raises is retried once.
- Each future is collected once and then released, so a seed is never
  lost or counted twice, and a finished result is not recomputed when its
  worker dies later.
- Ctrl-C cancels the queued tasks and kills this run's seed processes on
  every worker.
"""

import importlib.util
import logging
import os
import queue
import shutil
import signal
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

from verif.regress.executor.base import Call, ClusterError, Executor, Lost
from verif.regress.executor.seed import CLUSTER_INJECTIONS, kill_running, pack, run_seed, unpack

__all__ = ["DaskExecutor", "RETRY_CONFIG"]

#: Scheduler settings for "retry once, then crash" that charge only the task that ran.
RETRY_CONFIG = {"distributed.scheduler.allowed-failures": 1,
                "distributed.scheduler.worker-saturation": 1.0}

_TICK = 1.0                 # seconds between progress refreshes


class DaskExecutor(Executor):
    """Run calls as Dask tasks (see :class:`verif.regress.executor.Executor`).

    Parameters
    ----------
    local_workers : int, optional
        Start a ``LocalCluster`` of this many single-threaded worker processes.
    address : str, optional
        Or connect to the scheduler at this address (``tcp://host:8786``).
    connect_timeout : float
        Seconds to wait for the scheduler before :class:`ClusterError`.
    """

    remote = True

    def __init__(self, *, local_workers=None, address=None, connect_timeout=10.0):
        super().__init__()
        if (local_workers is None) == (address is None):
            raise TypeError("give exactly one of local_workers and address")
        if local_workers is not None and (isinstance(local_workers, bool)
                                          or not isinstance(local_workers, int)
                                          or local_workers < 1):
            raise ValueError(f"local_workers must be a positive integer, not {local_workers!r}")
        if not isinstance(connect_timeout, (int, float)) or connect_timeout <= 0:
            raise ValueError(f"connect_timeout must be a positive number of seconds, "
                             f"not {connect_timeout!r}")
        self.local_workers, self.address = local_workers, address
        self.connect_timeout = connect_timeout
        self.cluster = self.client = None
        self.note = None            # a one-line remark on the scheduler's retry settings

    def __enter__(self):
        if importlib.util.find_spec("distributed") is None:
            raise ClusterError("--cluster needs Dask's distributed, which is not installed: "
                               "pip install -e '.[cluster]'")
        from distributed.utils import silence_logging_cmgr
        # Each loss becomes a line of the run's own; the scheduler's log would repeat it.
        self._quiet = silence_logging_cmgr(logging.CRITICAL)
        self._quiet.__enter__()
        try:
            if self.address is None:
                self._start_local()
            else:
                self._connect()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start_local(self):
        import dask
        from distributed import Client, LocalCluster
        try:
            with dask.config.set(RETRY_CONFIG):
                # memory_limit=0: results are small and seeds run in processes of their own.
                self.cluster = LocalCluster(n_workers=self.local_workers, threads_per_worker=1,
                                            processes=True, dashboard_address=":0",
                                            memory_limit=0, silence_logs=logging.ERROR,
                                            preload=[__name__])
        except Exception as error:
            raise ClusterError(f"could not start a local Dask cluster of {self.local_workers} "
                               f"workers: {_first_line(error)}") from None
        self.client = Client(self.cluster, set_as_default=False)

    def _connect(self):
        from distributed import Client
        _probe(self.address, self.connect_timeout)
        try:
            self.client = Client(self.address, timeout=self.connect_timeout,
                                 set_as_default=False)
        except Exception as error:      # it answered the probe, then went away
            raise ClusterError(f"cannot reach the Dask scheduler at {self.address}: "
                               f"{_first_line(error)}") from None
        self.note = self._retry_note()

    def __exit__(self, *exc):
        try:
            if self.client is not None:
                self.client.close()
            if self.cluster is not None:
                self.cluster.close()
        finally:
            self._quiet.__exit__(None, None, None)
        return False

    def _retry_note(self):
        try:
            allowed, saturation = self.client.run_on_scheduler(
                lambda dask_scheduler: (dask_scheduler.allowed_failures,
                                        dask_scheduler.WORKER_SATURATION))
        except Exception:           # a scheduler that runs no client code: nothing to say
            return None
        if (allowed, saturation) == (1, 1.0):
            return None
        return (f"note: the scheduler retries a task whose worker died {allowed} time(s) with "
                f"worker-saturation {saturation}; for exactly one retry of the task that "
                f"ran, start it with DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=1 "
                f"DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION=1.0")

    def describe(self):
        workers = len(self.client.nthreads())
        where = "a local Dask cluster" if self.cluster is not None else \
            f"the Dask scheduler at {self.address}"
        return f"{where} ({workers} worker{'s' * (workers != 1)})"

    def seed_call(self, task, folder):
        task = replace(task, run_id=self.token)
        return Call(f"regress-{task.suite}-seed-{task.seed}-{self.token}", seed_on_worker,
                    (task, str(folder)), finish=lambda value: _land(value, folder))

    def run(self, calls, on_result, *, on_tick=None):
        finished = queue.Queue()        # filled from the client's event-loop thread
        futures, pending, keys = {}, set(), set()

        def submit(call):
            future = self.client.submit(call.fn, *call.args, key=call.name, pure=False,
                                        retries=1)
            futures[future] = call
            pending.add(future)
            keys.add(future.key)
            future.add_done_callback(finished.put)
        for call in calls:
            submit(call)
        try:
            while pending:
                try:
                    future = finished.get(timeout=_TICK)
                except queue.Empty:
                    future = None
                if future is not None and future in pending:
                    pending.discard(future)
                    keys.discard(future.key)
                    call = futures[future]
                    value = _collect(future)
                    future.release()        # nothing of it stays on a worker to be recomputed
                    for more in on_result(call, value if isinstance(value, Lost)
                                          or call.finish is None else call.finish(value)) or ():
                        submit(more)
                if on_tick is not None and pending and finished.empty():
                    status = self._status(keys)
                    if status is not None:
                        on_tick(*status)
        except BaseException:
            self._cancel(pending)
            raise

    def _status(self, keys):
        try:
            processing, nthreads = self.client.processing(), self.client.nthreads()
        except Exception:           # a slow scheduler: skip this refresh
            return None
        running = sum(min(len(keys.intersection(processing.get(worker, ()))), threads)
                      for worker, threads in nthreads.items())
        return running, len(nthreads)

    def _cancel(self, pending):
        try:
            self.client.cancel(list(pending), force=True)
            self.client.run(kill_running, self.token, on_error="ignore")
        except Exception:           # the cluster is going away anyway
            pass


def dask_setup(worker):
    """Preload of the ``local:N`` workers: a process group of their own.

    The terminal's Ctrl-C then reaches the runner alone, which cancels the
    run in order, instead of killing the workers under their tasks.
    """
    os.setpgrp()


def _probe(address, timeout):
    """Raise :class:`ClusterError` unless a Dask scheduler answers at ``address`` in time.

    The whole exchange has one deadline: a port that accepts and then says
    nothing (a web server, a proxy) must not hang the run.
    """
    import asyncio
    import socket
    from distributed.comm import connect
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.security import Security

    scheme, location = parse_address(address)
    if scheme in ("tcp", "tls"):
        # A plain connect first: a refused or unroutable port fails at once with
        # the operating system's reason, however loaded the machine is, whereas
        # distributed's retry loop may reach its deadline before its last attempt
        # says why.
        try:
            socket.create_connection(parse_host_port(location), timeout=timeout).close()
        except OSError as error:
            why = str(error) or type(error).__name__
            raise ClusterError(f"cannot reach the Dask scheduler at {address} within "
                               f"{timeout:g} s ({why})") from None

    async def identity():
        comm = await connect(address, timeout=timeout,
                             **Security().get_connection_args("client"))
        try:
            await comm.write({"op": "identity"})
            return await comm.read()
        finally:
            comm.abort()
    try:
        # A second longer than connect's own deadline, so that it says why it gave up.
        reply = asyncio.run(asyncio.wait_for(identity(), timeout + 1))
    except (asyncio.TimeoutError, OSError) as error:
        # distributed retries until the timeout; its last failure says why.
        cause = error.__cause__ or error.__context__
        why = f" ({str(cause).rsplit(': ', 1)[-1]})" if cause is not None and str(cause) \
            else ""
        raise ClusterError(f"cannot reach the Dask scheduler at {address} within "
                           f"{timeout:g} s{why}") from None
    except Exception as error:          # garbage in reply: something else listens there
        raise ClusterError(f"no Dask scheduler at {address}: what answers there does not "
                           f"speak Dask's protocol ({type(error).__name__})") from None
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        raise ClusterError(f"no Dask scheduler at {address}: it answers as "
                           f"{reply.get('type') if isinstance(reply, dict) else 'something else'}")


def _first_line(error):
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def _collect(future):
    """The value of a finished future, or a :class:`Lost` saying why there is none."""
    from distributed.scheduler import KilledWorker
    if future.status == "finished":
        try:
            return future.result()
        except Exception as error:  # lost between finishing and gathering
            return Lost(f"its result could not be fetched: {type(error).__name__}: {error}")
    if future.status == "cancelled":
        return Lost("the scheduler cancelled its task")
    error = future.exception()
    if isinstance(error, KilledWorker):
        return Lost(f"its Dask worker died on each of {error.allowed_failures + 1} attempts "
                    f"(the last on {error.last_worker.address}); see that worker's log")
    return Lost(f"it raised {type(error).__name__}: {error} on its Dask worker "
                f"(after one retry)")


def _land(value, folder):
    outcome, files = value
    unpack(files, folder)
    return outcome


def _scratch():
    try:
        from distributed import get_worker
        root = get_worker().local_directory
    except ValueError:          # not on a worker (called directly)
        root = None
    return Path(tempfile.mkdtemp(prefix="tpu-rtl-seed-", dir=root))


def seed_on_worker(task, shown):
    """A seed's Dask task: run it in scratch space, return ``(outcome, files)``.

    ``shown`` is the runner's folder for the seed, named in messages.
    """
    scratch = _scratch()
    try:
        note = _injected_kill(task) if task.inject in CLUSTER_INJECTIONS else None
        outcome = run_seed(task, scratch, shown=shown)
        if note:
            with open(scratch / "worker.log", "a") as log:
                log.write(note + "\n")
        return outcome, pack(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _injected_kill(task):
    """Kill this worker half a second into the seed (a test of the runner's fault handling).

    ``kill-worker`` does so on every attempt; ``kill-worker-once`` on the first attempt on
    each machine (a marker in its temporary folder remembers it), and the retry says so.
    """
    if task.inject == "kill-worker-once":
        marker = Path(tempfile.gettempdir()) / f"tpu-rtl-{task.run_id}-seed-{task.seed}-killed"
        if marker.exists():
            marker.unlink(missing_ok=True)
            return "retry: the first Dask worker running this seed was killed (kill-worker-once)"
        marker.touch()
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGKILL))
    timer.daemon = True
    timer.start()
    return None
