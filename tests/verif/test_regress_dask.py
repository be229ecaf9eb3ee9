"""``tpu-rtl regress --cluster``: the Dask executor against the local one, and its faults.

One ``LocalCluster`` of two single-threaded worker processes, set up as a
farm's scheduler should be, serves the tests that reach it by address
(``--cluster tcp://...``); the comparison with the local executor starts
its own with ``--cluster local:2``. Seeds run one or two short arith runs
each on Amaranth, and the CLI runs in this process where it need not be
interrupted, so the file stays fast.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from verif import cli
from verif.regress.executor import parse_cluster
from verif.regress.executor.seed import pack, unpack
from verif.regress.executor.slices import merge, slices

distributed = pytest.importorskip("distributed")

ONLY = "fp32_to_bf16"          # both numerics modes of one unit: two short runs per seed


def _regress(*args, cwd, new_session=False):
    """``tpu-rtl regress ...`` in a process of its own (to be interrupted like one)."""
    env = dict(os.environ, TPU_RTL_CACHE=str(Path("build/sim").resolve()))
    # SIGINT as a terminal's foreground job has it: a test run started in the background
    # of a non-interactive shell inherits it ignored, and Python then keeps it ignored.
    return subprocess.Popen([sys.executable, "-m", "verif.cli", "regress", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            env=env, start_new_session=new_session,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@pytest.fixture
def regress(monkeypatch, capsys):
    """``tpu-rtl regress ...`` in this process, in a folder: (status, stdout, stderr)."""
    monkeypatch.setenv("TPU_RTL_CACHE", str(Path("build/sim").resolve()))

    def run(*args, cwd):
        cwd.mkdir(parents=True, exist_ok=True)
        monkeypatch.chdir(cwd)
        status = cli.main(["regress", *args])
        out, err = capsys.readouterr()
        return status, out, err
    return run


def _verdicts(folder):
    """(name, failure type, failure message) of every JUnit case, in file order."""
    cases = ET.parse(folder / "junit.xml").getroot()
    return [(case.get("name"), *((case.find("failure").get("type"),
                                  case.find("failure").get("message"))
                                 if case.find("failure") is not None else (None, None)))
            for case in cases]


@pytest.fixture(scope="module")
def scheduler():
    """(address, client) of a LocalCluster set for one retry per task, as a farm's should be."""
    import dask
    from verif.regress.executor.dask import RETRY_CONFIG
    with dask.config.set(RETRY_CONFIG):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=":0", memory_limit=0)
    client = distributed.Client(cluster, set_as_default=False)
    try:
        yield cluster.scheduler_address, client
    finally:
        client.close()
        cluster.close()


def _both_workers(client):
    client.wait_for_workers(2, timeout=60)     # a killed worker's nanny restarts it


def test_a_local_cluster_gives_the_local_verdicts_and_coverage(tmp_path, regress, seed):
    base = 1 + seed % 1000
    args = ("arith", "--seeds", "2", "--seed-base", str(base), "--sim", "amaranth", "--only",
            ONLY, "--inject", "golden-no-flush", "--inject-seed", str(base + 1))
    local = regress(*args, "-j", "2", cwd=tmp_path / "local")
    on_dask = regress(*args, "--cluster", "local:2", cwd=tmp_path / "dask")
    assert local[0] == on_dask[0] == 1, local[2] + on_dask[2]
    assert on_dask[1].splitlines()[0].endswith("a local Dask cluster (2 workers)")
    # Everything after the header: the verdicts, coverage percentages and repro commands
    # (each run's folder is named by the time it started).
    def body(out):
        return re.sub(r"build/regress/arith/[0-9-]+/", "build/regress/arith/RUN/", out) \
            .splitlines()[1:]
    assert body(local[1]) == body(on_dask[1])
    assert "passed 1 of 2 seeds" in on_dask[1]
    assert f"FAILED seed {base + 1} (fail): fp32_to_bf16/tpu" in on_dask[1]
    outs = [tmp_path / kind / "build" / "regress" / "arith" / "latest"
            for kind in ("local", "dask")]
    verdicts = _verdicts(outs[1])
    assert _verdicts(outs[0]) == verdicts
    assert [(name, kind) for name, kind, _ in verdicts] == [
        (f"seed {base}: {ONLY}/tpu", None), (f"seed {base}: {ONLY}/ieee", None),
        (f"seed {base + 1}: {ONLY}/tpu", "fail"), (f"seed {base + 1}: {ONLY}/ieee", None)]
    assert verdicts[2][2].startswith("fp32_to_bf16/tpu")
    # The merged functional coverage is the same file, made from files that came back as data.
    assert (outs[0] / "coverage.xml").read_bytes() == (outs[1] / "coverage.xml").read_bytes()
    for s in (base, base + 1):
        runs = [sorted(p.name for p in (out / "seeds" / str(s)).glob("*.cov.xml")) for out in outs]
        assert runs[0] == runs[1] == [f"{ONLY}-ieee.cov.xml", f"{ONLY}-tpu.cov.xml"]
        records = [json.loads((out / "seeds" / str(s) / "result.json").read_text())
                   for out in outs]
        assert records[0]["cases"] == records[1]["cases"]


def test_a_killed_worker_is_retried_once_then_its_seed_is_a_crash(tmp_path, regress, scheduler,
                                                                  seed):
    address, client = scheduler
    _both_workers(client)
    base = 1 + seed % 1000
    code, out, err = regress(
        "arith", "--seeds", "2", "--seed-base", str(base), "--sim", "amaranth", "--only",
        f"{ONLY}-tpu", "--inject", "kill-worker", "--inject-seed", str(base + 1), "--cluster",
        address, cwd=tmp_path)
    assert code == 1, out + err
    assert "passed 1 of 2 seeds" in out
    assert f"FAILED seed {base + 1} (crash): lost: its Dask worker died on each of 2 attempts" \
        in out
    assert f"--inject kill-worker --inject-seed {base + 1} --cluster local:2" in out
    folder = tmp_path / "build" / "regress" / "arith" / "latest"
    # Every seed exactly once, in the report and on the log.
    assert [name for name, *_ in _verdicts(folder)] == [f"seed {base}: {ONLY}/tpu",
                                                        f"seed {base + 1}"]
    for s in (base, base + 1):
        assert sum(line.startswith(f"seed {s}: ") for line in err.splitlines()) == 1, err
    assert not (folder / "seeds" / str(base + 1)).exists()


@pytest.mark.slow      # a cluster's robustness, 7-9 s: make test keeps the retry to a crash
def test_a_worker_killed_once_costs_nothing_but_the_retry(tmp_path, regress, scheduler, seed):
    address, client = scheduler
    _both_workers(client)
    base = 1 + seed % 1000
    code, out, err = regress(
        "arith", "--seeds", "2", "--seed-base", str(base), "--sim", "amaranth", "--only",
        f"{ONLY}-tpu", "--inject", "kill-worker-once", "--inject-seed", str(base + 1),
        "--cluster", address, cwd=tmp_path)
    assert code == 0, out + err
    assert "passed 2 of 2 seeds" in out
    folder = tmp_path / "build" / "regress" / "arith" / "latest"
    assert [name for name, *_ in _verdicts(folder)] == [f"seed {base}: {ONLY}/tpu",
                                                        f"seed {base + 1}: {ONLY}/tpu"]
    log = (folder / "seeds" / str(base + 1) / "worker.log").read_text()
    assert "retry: the first Dask worker running this seed was killed" in log
    assert json.loads((folder / "seeds" / str(base + 1) / "result.json").read_text())[
        "status"] == "pass"


def test_an_unreachable_scheduler_is_one_line_before_anything_runs(tmp_path, regress):
    with socket.socket() as s:          # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, out, err = regress("arith", "--seeds", "2", "--sim", "amaranth", "--cluster",
                             f"tcp://127.0.0.1:{port}", "--connect-timeout", "1", cwd=tmp_path)
    assert code == 1
    assert err.strip() == (f"tpu-rtl regress: cannot reach the Dask scheduler at "
                           f"tcp://127.0.0.1:{port} within 1 s ([Errno 111] Connection refused)")
    assert out == "" and not (tmp_path / "build").exists()


@pytest.mark.slow      # a cluster's robustness, 7-9 s: make test keeps the retry to a crash
def test_ctrl_c_cancels_the_rest_and_reports_what_finished(tmp_path, scheduler, seed):
    psutil = pytest.importorskip("psutil")
    address, client = scheduler
    _both_workers(client)
    base = 1000 + seed % 100000       # seed numbers of this test alone, to find its processes
    proc = _regress("arith", "--seeds", "3", "--seed-base", str(base), "--sim", "amaranth",
                    "--only", f"{ONLY}-tpu", "--inject", "hang", "--inject-seed", str(base + 1),
                    "--cluster", address, cwd=tmp_path, new_session=True)

    def hung():
        return [p for p in psutil.process_iter(["cmdline"])
                if {"verif.regress.worker", str(base + 1)} <= set(p.info["cmdline"] or ())]
    lines = []
    with proc:
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + 120
            while sum(": pass (" in line for line in lines) < 2 or not hung():
                assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
                time.sleep(0.2)
            os.killpg(proc.pid, signal.SIGINT)          # as a terminal's Ctrl-C does
            try:
                status = proc.wait(timeout=60)          # its stdout, a summary, fits the pipe
            except subprocess.TimeoutExpired:
                pytest.fail("tpu-rtl regress still runs 60 s after Ctrl-C:\n" + "".join(lines))
            out = proc.stdout.read()
            assert status == 130, out + "".join(lines)
            reader.join(timeout=10)
            deadline = time.monotonic() + 10        # stopped with the run, not left to hang
            while hung() and time.monotonic() < deadline:
                time.sleep(0.2)
            left = hung()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            for p in hung():                            # never leave a hanging seed behind
                p.kill()
    assert not left, "the interrupted seed's process outlived the run"
    assert "interrupted: 2 of 3 seeds finished" in "".join(lines)
    assert "passed 2 of 2 seeds" in out
    folder = tmp_path / "build" / "regress" / "arith" / "latest"
    assert [name for name, *_ in _verdicts(folder)] == [
        f"seed {base}: {ONLY}/tpu", f"seed {base + 1}", f"seed {base + 2}: {ONLY}/tpu"]
    assert sorted(p.name for p in (folder / "seeds").iterdir()) == sorted([str(base),
                                                                           str(base + 2)])
    assert (folder / "coverage.xml").exists()


def test_a_seed_process_ends_soon_after_its_parent_dies(tmp_path):
    """As when a Dask worker is killed under it: nothing is left running, unowned."""
    psutil = pytest.importorskip("psutil")
    # The parent starts a seed that would hang forever, as run_seed does, and dies at once,
    # likely before the seed's interpreter has even started.
    parent = ("import os, subprocess, sys\n"
              "p = subprocess.Popen([sys.executable, '-m', 'verif.regress.worker', 'arith', '1',"
              " '--sim', 'amaranth', '--out', sys.argv[1], '--inject', 'hang'],"
              " start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,"
              " env=dict(os.environ, TPU_RTL_SEED_PARENT=str(os.getpid())))\n"
              "print(p.pid)\n")
    pid = int(subprocess.run([sys.executable, "-c", parent, str(tmp_path)], check=True,
                             capture_output=True, text=True, timeout=60).stdout)

    def alive():
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
    deadline = time.monotonic() + 30
    try:
        while alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not alive()
    finally:
        if alive():
            psutil.Process(pid).kill()


@pytest.mark.parametrize("args, status, message", [
    (["--cluster", "local:2", "-j", "2"], 2, "give -j (workers on this machine) or --cluster, "
                                             "not both"),
    (["--inject", "kill-worker"], 2, "--inject kill-worker kills a Dask worker; it needs "
                                     "--cluster"),
    (["--cluster", "host:8786"], 2, "error: --cluster 'host:8786': give local:N or a scheduler "
                                    "address tcp://HOST:PORT (or tls://HOST:PORT)"),
])
def test_cluster_usage_errors_are_one_line(tmp_path, regress, args, status, message):
    code, out, err = regress("arith", "--sim", "amaranth", *args, cwd=tmp_path)
    assert (code, out) == (status, "")
    assert err == f"tpu-rtl regress: {message}\n"


@pytest.mark.parametrize("spec, parsed", [
    (None, ("local", None)), ("local:3", ("local-cluster", 3)),
    ("tcp://10.0.0.7:8786", ("scheduler", "tcp://10.0.0.7:8786")),
])
def test_cluster_specs(spec, parsed):
    assert parse_cluster(spec) == parsed


@pytest.mark.parametrize("spec", ["local:0", "local:", "local:x", "10.0.0.7:8786",
                                  "tcp://10.0.0.7", "http://host:80", "tcp://:8786"])
def test_bad_cluster_specs_are_one_line_errors(spec):
    with pytest.raises(ValueError, match="^--cluster .*give local:N|needs a positive"):
        parse_cluster(spec)


def test_packed_results_unpack_to_the_same_files_and_no_others(tmp_path):
    seed = tmp_path / "worker" / "seed"
    (seed / "fp32_add-tpu").mkdir(parents=True)        # a simulator's run folder stays behind
    (seed / "fp32_add-tpu" / "obj.o").write_bytes(b"\0" * 100)
    files = {"result.json": b'{"status": "pass"}', "worker.log": b"",
             "fp32_add-tpu.cov.xml": b"<top/>", "fp32_add-tpu.dat": b"C 'x' 3\n" * 1000}
    for name, data in files.items():
        (seed / name).write_bytes(data)
    packed = pack(seed)
    assert set(packed) == set(files)
    assert len(packed["fp32_add-tpu.dat"]) < len(files["fp32_add-tpu.dat"]) / 10
    unpack(packed, tmp_path / "runner")
    assert {p.name: p.read_bytes() for p in (tmp_path / "runner").iterdir()} == files
    with pytest.raises(ValueError, match="not a plain file name"):
        unpack({"../escape": packed["worker.log"]}, tmp_path / "runner")


def test_slices_cover_the_range_once():
    assert slices(0, 10, 4) == [(0, 2), (2, 5), (5, 7), (7, 10)]
    assert slices(5, 7, 8) == [(5, 6), (6, 7)]
    with pytest.raises(ValueError):
        slices(3, 3, 1)


def test_sliced_results_merge_into_the_whole_check():
    from sim.exhaustive import ExhaustiveResult
    parts = [ExhaustiveResult("tpu", 3 * 65536, 2, ["a=0x0005 b=0x0001: got 0x1, expected 0x2",
                                                    "a=0x0007 b=0xFFFF: got 0x3, expected 0x4"],
                              build_seconds=1.5),
             ExhaustiveResult("tpu", 2 * 65536, 0, []),
             ExhaustiveResult("tpu", 65536, 1, ["a=0x0001 b=0x0100: got 0x5, expected 0x6"])]
    whole = merge("bf16_mul_exhaustive", "tpu", reversed(parts), seconds=2.0)
    assert (whole.pairs_checked, whole.mismatches, whole.build_seconds) == (6 * 65536, 3, 1.5)
    assert whole.first_mismatches[0].startswith("a=0x0001 b=0x0100")
    assert [m[:6] for m in whole.first_mismatches] == ["a=0x00"] * 3
    assert whole.cycles_per_second == 6 * 65536 / 2.0 and not whole.ok


@pytest.mark.slow      # a cluster's robustness, 7-9 s: make test keeps the retry to a crash
def test_exhaustive_check_runs_in_slices_on_the_cluster(tmp_path, scheduler):
    from verif.regress.executor.dask import DaskExecutor
    from verif.regress import run_exhaustive
    address, client = scheduler
    _both_workers(client)
    with DaskExecutor(address=address) as executor:
        result = run_exhaustive(executor=executor, a_range=(0x007F, 0x0082), slices=2,
                                out=tmp_path)
    assert [o.seed for o in result.outcomes] == ["tpu", "ieee"]
    for outcome in result.outcomes:
        assert outcome.status == "pass", outcome.message
        # Three values of a, each against all of b, in two slices: none lost, none twice.
        assert outcome.record["summary"].startswith(
            f"bf16_mul exhaustive ({outcome.seed}): {3 * 65536} pairs, ok")
    assert [name for name, *_ in _verdicts(tmp_path)] == ["tpu", "ieee"]   # the planned order


@pytest.mark.slow
def test_regress_all_on_a_cluster_merges_what_came_back_as_data(tmp_path, regress, scheduler):
    address, client = scheduler
    _both_workers(client)
    args = ("all", "--suites", "arith", "--seeds", "2", "--sim", "verilator", "--only",
            "fp32_to_bf16-ieee", "--cover-goal", "100")
    status, out, err = regress(*args, "--cluster", address, cwd=tmp_path / "dask")
    assert status == 0, out + err
    local = regress(*args, "-j", "2", cwd=tmp_path / "local")
    assert local[0] == 0, local[1] + local[2]
    folders = [tmp_path / kind / "build" / "regress" / "all" / "latest"
               for kind in ("dask", "local")]
    # The seeds' coverage, code coverage and source maps came back: the same reports.
    for name in ("coverage.json", "lcov.info", "source_coverage.json"):
        assert (folders[0] / name).read_text() == (folders[1] / name).read_text(), name
    assert (folders[0] / "arith" / "seeds" / "2" / "fp32_to_bf16-ieee.src.json").exists()
