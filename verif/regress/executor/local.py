"""The local executor: ``jobs`` threads on this machine, each waiting on one seed process.

A seed runs in its own process (:func:`verif.regress.executor.seed.run_seed`), so
the threads only wait; ``jobs`` is how many seeds run at once.
"""

import concurrent.futures as cf
import traceback
from dataclasses import replace

from verif.regress.executor.base import Call, Executor, Lost
from verif.regress.executor.seed import kill_running, run_seed

__all__ = ["LocalExecutor"]


class LocalExecutor(Executor):
    """Run calls on ``jobs`` threads of this process (see
    :class:`verif.regress.executor.Executor`)."""

    def __init__(self, *, jobs=1):
        super().__init__()
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise ValueError(f"jobs must be a positive integer, not {jobs!r}")
        self.jobs = jobs

    def describe(self):
        return f"{self.jobs} local worker{'s' * (self.jobs > 1)}"

    def seed_call(self, task, folder):
        return Call(f"{task.suite}-seed-{task.seed}", run_seed, (replace(task, run_id=self.token), folder))

    def run(self, calls, on_result, *, on_tick=None):
        pool = cf.ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="regress")
        futures = {pool.submit(_call, call): call for call in calls}
        pending = set(futures)
        try:
            while pending:
                done, pending = cf.wait(pending, timeout=1.0, return_when=cf.FIRST_COMPLETED)
                for future in done:
                    call = futures[future]
                    value = future.result()
                    for more in on_result(call, value if isinstance(value, Lost)
                                          or call.finish is None else call.finish(value)) or ():
                        queued = pool.submit(_call, more)
                        futures[queued] = more
                        pending.add(queued)
                if on_tick is not None and pending:
                    on_tick(sum(f.running() for f in pending), self.jobs)
        except BaseException:
            # Ctrl-C (or a failing callback): queued calls never start, running seeds are
            # killed, and their threads end before this returns.
            pool.shutdown(wait=False, cancel_futures=True)
            while not all(f.done() for f in futures):   # a seed may start as we kill
                kill_running(self.token)
                cf.wait(futures, timeout=0.2)
            raise
        pool.shutdown(wait=True)


def _call(call):
    try:
        return call.fn(*call.args)
    except Exception as error:          # reported as this call's loss, never the run's
        return Lost(f"{type(error).__name__}: {error}\n{traceback.format_exc()}")
