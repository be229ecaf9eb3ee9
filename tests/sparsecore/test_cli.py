"""``tpu-rtl sparsecore`` and the SparseCore section of ``tpu-rtl bench``, on tiny batches.

Every run is on Amaranth's simulator with a few ids (seconds each), apart from one slow
test's on Verilator. The verdicts come from the command; the counts they are checked
against here (unique ids, ids per bag, the Zipf law's probabilities) are computed
independently, from the batch the command's seed makes.
"""

import dataclasses
import json
import re
import shlex

import numpy as np
import pytest

import verif.bench.blocks
from golden import sparsecore as golden
from sim import sparsecore as sim_sparsecore
from verif import cli
from verif.cli import sparsecore as sparsecore_cli
from verif.suites.sparsecore import batch as sparse_batch
from verif.bench.blocks import SparseBench, run_bench

from ..support import error_lines

#: A batch small enough for Amaranth's simulator: 2 bags of 3 ids over 8 rows of 8 words.
TINY = ["--rows", "8", "--width", "8", "--batch", "2", "--bag", "3"]


def _tiny_batch(seed, *, alpha=1.15, weighted=False, special_density=0.0):
    return sparse_batch.make_batch(np.random.default_rng(seed), rows=8, width=8, batch=2,
                                     bag=3, alpha=alpha, weighted=weighted,
                                     special_density=special_density)


def test_prints_a_verdict_and_writes_the_figures(seed, tmp_path, capsys):
    path = tmp_path / "out" / "sc.json"
    assert cli.main(["sparsecore", *TINY, "--combiner", "mean", "--weighted", "--optimizer",
                     "adagrad", "--special-density", "0.2", "--numerics", "ieee", "--seed",
                     str(seed), "--json", str(path)]) == 0
    out = capsys.readouterr().out
    unique = len(set(_tiny_batch(seed, weighted=True, special_density=0.2).indices.tolist()))
    assert f"2 bags of 3 ids (6 ids, {unique} unique, Zipf alpha 1.15) over a 8x8 table " \
           f"(numerics ieee, seed {seed}, backend amaranth)" in out
    # 2 bags x 8 words looked up; the whole table and its accumulators after the update.
    assert re.search(r"lookup mean/ieee +16 words bit-exact +cycles +\d+ +rows read +"
                     rf"{unique} +gather", out)
    assert re.search(r"update adagrad/ieee +128 words bit-exact", out)
    assert f"6 before dedup (one per id), {unique} after" in out
    report = json.loads(path.read_text())
    assert report["passed"] and report["failures"] == []
    assert report["hbm_reads"] == {"before_dedup": 6, "after_dedup": unique,
                                   "saved": 1 - unique / 6}
    for op, words in (("lookup", 16), ("update", 128)):
        figures = report[op]
        assert figures["bit_exact"] and figures["results"] == words
        assert figures["hbm_reads"] == unique and figures["cycles"] > 0
        assert 0 < figures["gather_bandwidth"] <= 1 and 0 < figures["lane_busy"] <= 1


def _fails(capsys, args):
    assert cli.main(["sparsecore", *TINY, *args]) == 1
    captured = capsys.readouterr()
    assert len(error_lines(captured.err)) == 1, captured.err
    return captured


def test_a_wrong_result_exits_non_zero_with_the_reproduce_command(seed, monkeypatch, capsys):
    real = golden.lookup
    monkeypatch.setattr(golden, "lookup", lambda *a, **k: (
        real(*a, **k).view(np.uint32) ^ np.uint32(1)).view(np.float32))
    captured = _fails(capsys, ["--alpha", "0.5", "--idle", "0.25", "--seed", str(seed)])
    assert re.search(r"lookup sum/tpu +16 words MISMATCH", captured.out)
    assert re.search(r"update sgd/tpu +64 words bit-exact", captured.out)
    assert "FAILED lookup sum/tpu: 16 of 16 mismatched; first: lookup sum/tpu out[0, 0]: " \
           "expected 0x" in captured.out
    first = error_lines(captured.err)[0]
    assert first.startswith("tpu-rtl sparsecore: mismatch: lookup sum/tpu: 16 of 16 mismatched")
    # The printed command parses back to this very run.
    command = captured.out.split("reproduce: ")[1].splitlines()[0]
    assert f"seed {seed}; reproduce: {command}" in captured.out
    assert command in captured.err
    words = shlex.split(command)
    assert words[:2] == ["tpu-rtl", "sparsecore"]
    again = cli._parser().parse_args(words[1:])
    want = cli._parser().parse_args(["sparsecore", *TINY, "--alpha", "0.5", "--idle", "0.25",
                                     "--seed", str(seed)])
    for name in sparsecore_cli.RUN_OPTIONS:
        assert getattr(again, name) == getattr(want, name), name


def test_hbm_reads_other_than_the_unique_ids_fail(seed, monkeypatch, capsys):
    real = sim_sparsecore.update

    def one_read_too_many(*args, **kwargs):
        run = real(*args, **kwargs)
        return dataclasses.replace(run, hbm_reads=run.hbm_reads + 1)
    monkeypatch.setattr(sim_sparsecore, "update", one_read_too_many)
    captured = _fails(capsys, ["--seed", str(seed)])
    unique = len(set(_tiny_batch(seed).indices.tolist()))
    assert re.search(r"update sgd/tpu +64 words MISMATCH", captured.out)
    assert f"update sgd/tpu: the tile read {unique + 1} rows from HBM for {unique} unique ids" \
        in captured.err


@pytest.mark.parametrize("args, message", [
    (["--rows", "0"], "argument --rows: must be a positive integer, not 0"),
    (["--bag", "-2"], "argument --bag: must be a positive integer, not -2"),
    (["--alpha", "-0.5"], "argument --alpha: must be a finite number >= 0, not -0.5"),
    (["--alpha", "nan"], "argument --alpha: must be a finite number >= 0, not nan"),
    (["--idle", "1"], "argument --idle: must be at least 0 and below 1, not 1"),
    (["--special-density", "x"], "argument --special-density: must be a number, not 'x'"),
    (["--jitter", "-1"], "argument --jitter: must be a non-negative integer, not -1"),
    (["--optimizer", "adam"], "argument --optimizer: invalid choice: 'adam'"),
    (["--words-per-cycle", "3"], "argument --words-per-cycle: invalid choice: 3"),
    (["--backend", "spice"], "argument --backend: invalid choice: 'spice'"),
])
def test_bad_arguments_are_one_line_errors(args, message, capsys):
    assert cli.main(["sparsecore", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"tpu-rtl sparsecore: error: {message}")
    assert err[0].endswith("(usage: tpu-rtl sparsecore --help)")


def test_bench_accepts_only_a_known_section(capsys):
    assert cli.main(["bench", "mxu"]) == 2
    assert "argument SECTION: invalid choice: 'mxu'" in capsys.readouterr().err


@pytest.mark.slow         # make test's budget: a whole SparseCore bench to test a docs splice
def test_bench_section_replaces_its_old_text(seed, tmp_path, monkeypatch):
    bench = SparseBench(backend="amaranth", row_widths=(8,), read_latencies=(4,),
                        gather_ids=16, alphas=(1.5,), zipf_rows=16, zipf_width=8, zipf_bags=2,
                        bag=4, optimizer="sgd")
    monkeypatch.setattr(verif.bench.blocks, "QUICK", dataclasses.replace(
        verif.bench.blocks.QUICK, sparsecore=bench))
    output = tmp_path / "benchmarks.md"
    output.write_text("# Benchmarks\n\n## DMA\n\nkept\n\n## SparseCore\n\nstale\n\n"
                      "## Later\n\nkept too\n")
    text = run_bench(quick=True, output=output, only="sparsecore", seed=seed)
    assert output.read_text() == text
    assert "stale" not in text and text.count("## SparseCore") == 1
    assert text.startswith("# Benchmarks\n\n## DMA\n\nkept\n\n## SparseCore\n\nMeasured by "
                           "`tpu-rtl bench sparsecore`")
    assert text.endswith("\n## Later\n\nkept too\n")
    curve = [[cell.strip() for cell in line.split("|")[1:-1]] for line in text.splitlines()
             if line.startswith("| 8 | 4 |")]
    assert len(curve) == 1 and curve[0][5] == "yes"          # bit-exact
    assert 0 < float(curve[0][2].rstrip("%")) <= 100          # gather
    # The dedup row: the unique ids of the batch `tpu-rtl sparsecore` makes with this seed.
    batch = sparse_batch.make_batch(np.random.default_rng(seed), rows=16, width=8, batch=2,
                                      bag=4, alpha=1.5)
    unique = len(set(batch.indices.tolist()))
    row = next(line for line in text.splitlines() if line.startswith("| 1.5 |"))
    cells = [cell.strip() for cell in row.split("|")[1:-1]]
    assert cells[1:4] == ["8", str(unique), f"{unique} / {unique}"]
    assert cells[9].endswith("(100.0%)")        # SGD writes a line per chunk: never bound
    assert cells[10] == "yes" and cells[11] == "reads = unique: met"


def test_write_bound_counts_slots_against_writes():
    # Ids 5, 5, 5, 2, 7: rows of one chunk take 3, 1 and 1 ring slots; Adagrad writes
    # 2 lines a chunk at 8 words a cycle, 4 at 4 words a cycle.
    batch = sparse_batch.Batch(np.zeros((8, 8), np.float32), np.array([5, 5, 5, 2, 7]),
                                 np.array([0, 5]), None, np.zeros((1, 8), np.float32))
    assert verif.bench.blocks._write_bound(batch, "adagrad", 8) == 5 / (3 + 2 + 2)
    assert verif.bench.blocks._write_bound(batch, "adagrad", 4) == 5 / (4 + 4 + 4)
    assert verif.bench.blocks._write_bound(batch, "sgd", 8) == 1.0


@pytest.mark.slow         # a Verilator build of the tile (40 s)
def test_one_verilator_build_serves_both_operations_in_their_own_tiles_cycles(
        seed, tmp_path, monkeypatch, capsys):
    """The lookup and the update share one Verilator build of a tile with both operations
    (``shared_tile``), and take the cycles of Amaranth's tiles built for one each."""
    monkeypatch.setenv("TPU_RTL_CACHE", str(tmp_path / "cache"))
    args = [*TINY, "--combiner", "mean", "--optimizer", "adagrad", "--seed", str(seed)]
    cycles = {}
    for backend in ("amaranth", "verilator"):
        with monkeypatch.context() as patch:
            if backend == "amaranth":
                # The command imports it when it runs (verif/cli/sparsecore.py).
                patch.setattr(sparse_batch, "shared_tile", lambda combiner, optimizer: None)
            assert cli.main(["sparsecore", *args, "--backend", backend]) == 0
        out = capsys.readouterr().out
        cycles[backend] = re.findall(r"(lookup|update) \S+ .* cycles +(\d+)", out)
        assert [op for op, _ in cycles[backend]] == ["lookup", "update"], out
    assert cycles["verilator"] == cycles["amaranth"]
    builds = [p for p in (tmp_path / "cache" / "whole-verilator").glob("sparsecore-*")
              if p.is_dir()]
    assert len(builds) == 1, builds
