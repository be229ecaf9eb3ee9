"""``tpu-rtl regress all``: one closure table, merged functional coverage (JSON, UCIS),
code coverage on the ``hdl/`` source (lcov, Cobertura) and the HTML report."""

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.verilog.repeated import convert
from sim.verilog.source_map import _keeping_attributes, export_with_source, source_map
from verif.regress import campaign, code_coverage, functional, source_coverage
from verif.regress.executor.base import Call, Executor, Lost
from verif.regress.executor.local import LocalExecutor

CHECKOUT = Path(__file__).resolve().parents[2]


def _regress(*args, cwd):
    env = dict(os.environ, TPU_RTL_CACHE=str((CHECKOUT / "build" / "sim").resolve()))
    return subprocess.run([sys.executable, "-m", "verif.cli", "regress", "all", *args],
                          capture_output=True, text=True, cwd=cwd, env=env)


def _lcov_records(path):
    """{file: ({line: hits}, [(line, taken)])} by the lcov format's rules, read here."""
    records, current = {}, None
    for raw in Path(path).read_text().splitlines():
        tag, _, value = raw.partition(":")
        if tag == "SF":
            assert current is None, "a record opened inside another"
            current = value
            records[current] = ({}, [])
        elif tag == "end_of_record":
            assert current is not None
            current = None
        elif tag == "DA":
            line, hits = map(int, value.split(",")[:2])
            records[current][0][line] = hits
        elif tag == "BRDA":
            line, _block, _branch, taken = value.split(",")
            records[current][1].append((int(line), 0 if taken == "-" else int(taken)))
        else:
            assert tag in ("TN", "LF", "LH", "BRF", "BRH"), raw
    assert current is None, "the last record is not closed"
    return records


def _line_of(path, text):
    """The number of the one line of ``path`` holding ``text``."""
    found = [n for n, line in enumerate((CHECKOUT / path).read_text().splitlines(), 1)
             if text in line]
    assert len(found) == 1, (path, text, found)
    return found[0]


def test_one_table_and_every_merged_report(tmp_path):
    proc = _regress("--suites", "arith", "--only", "fp32_to_bf16-ieee", "--seeds", "2", "-j",
                    "2", "--sim", "verilator", "--cover-goal", "100", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith("arith ")]
    assert rows and rows[0][:6] == ["arith", "2", "2", "25", "/", "25"]
    assert "100.00%" in rows[0] and "toggle" in " ".join(rows[0])
    # Yosys' marker branches are never taken and left out: every branch here is taken.
    assert "branch 100.0%" in " ".join(rows[0])
    out = tmp_path / "build" / "regress" / "all" / "latest"
    # The merged database sums the two seeds' hits, bin by bin.
    database = functional.read_json(out / "coverage.json")
    point = database["arith"]["points"]["arith.fp32_to_bf16.ieee.a_class"]
    per_seed = [ET.parse(out / "arith" / "seeds" / str(s) / "fp32_to_bf16-ieee.cov.xml")
                for s in (1, 2)]
    for b in point.bins:
        assert b.hits == sum(int(x.find(f".//a_class/*[@bin='{b.label}']").get("hits"))
                             for x in per_seed)
    # Each seed's code coverage names its build, not where the cache is, so seeds built in
    # other caches (a cluster's machines) merge point by point.
    for s in (1, 2):
        files = {code_coverage.fields(key)["f"] for key in code_coverage.read(
            out / "arith" / "seeds" / str(s) / "fp32_to_bf16-ieee.dat")}
        assert len(files) == 1 and re.fullmatch(
            r"cocotb-verilator/fp32_to_bf16-[0-9a-f]+/fp32_to_bf16\.v", files.pop()), files
    # UCIS: read back with pyucis, every bin with the same hits.
    ucis = functional.read_ucis(out / "coverage.ucis.xml")["arith"]
    assert ucis["arith.fp32_to_bf16.ieee.a_class"] == {b.label: b.hits for b in point.bins}
    assert sum(map(len, ucis.values())) == 25
    # lcov names hdl/ files and lines that exist, and so does Cobertura.
    records = _lcov_records(out / "lcov.info")
    assert records and all(path.startswith("hdl/") for path in records)
    for path, (lines, _) in records.items():
        length = len((CHECKOUT / path).read_text().splitlines())
        assert lines and all(1 <= line <= length for line in lines), path
    cobertura = ET.parse(out / "cobertura.xml").getroot()
    assert {c.get("filename") for c in cobertura.iter("class")} == set(records)
    # Only the reset and the enable branches are left in the pipeline's files (the
    # marker's are dropped), and every one is taken.
    assert all(taken > 0 for _, taken in records["hdl/lib/stager.py"][1])
    # The NaN test of every operand is reached in these seeds.
    nan_line = _line_of("hdl/arith/float_ops.py", "is_nan=Signal(")
    assert records["hdl/arith/float_ops.py"][0][nan_line] > 0
    html = (tmp_path / "build" / "regress" / "report" / "index.html").read_text()
    assert "all/" in html and "report/index.html" in html
    index = (out / "report" / "index.html").read_text()
    assert "Every seed passed" in index and "closure-arith.png" in index
    assert (out / "report" / "closure-arith.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "report" / "src" / "hdl" / "arith" / "float_ops.py.html").exists()


@pytest.mark.slow      # the Amaranth case below keeps a starved bin in the default suite
def test_a_starved_bin_is_uncovered_everywhere_and_fails_the_goal(tmp_path):
    proc = _regress("--suites", "arith", "--only", "fp32_to_bf16-ieee", "--seeds", "1",
                    "--sim", "verilator", "--cover-goal", "100", "--inject", "starve-nan",
                    cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "functional coverage below the goal of 100% in arith (88.00%)" in proc.stderr
    assert "3 bins stayed empty" in proc.stdout and "a_class: +nan" in proc.stdout
    out = tmp_path / "build" / "regress" / "all" / "latest"
    ucis = functional.read_ucis(out / "coverage.ucis.xml")["arith"]
    assert ucis["arith.fp32_to_bf16.ieee.a_class"]["+nan"] == 0
    assert ucis["arith.fp32_to_bf16.ieee.a_class"]["+normal"] > 0
    page = (out / "report" / "suite-arith.html").read_text()
    holes = page.split("<h2>Uncovered bins</h2>")[1].split("</ul>")[0]
    assert "a_class</code>: +nan" in holes and "a_class</code>: +normal" not in holes
    assert "below the goal: arith" in (out / "report" / "index.html").read_text()
    # No NaN operand: the line making the NaN test shows 0 hits, the infinity test's hits.
    lines, branches = _lcov_records(out / "lcov.info")["hdl/arith/float_ops.py"]
    assert lines[_line_of("hdl/arith/float_ops.py", "is_nan=Signal(")] == 0
    assert lines[_line_of("hdl/arith/float_ops.py", "is_inf=Signal(")] > 0
    summary = json.loads((out / "source_coverage.json").read_text())
    assert _line_of("hdl/arith/float_ops.py", "is_nan=Signal(") in \
        summary["never_reached"]["hdl/arith/float_ops.py"]


def test_until_covered_stops_at_the_goal_or_names_the_empty_bins(tmp_path):
    proc = _regress("--suites", "arith", "--only", "fp32_to_bf16-ieee", "--seeds", "3",
                    "--until-covered", "--sim", "amaranth", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tmp_path / "build" / "regress" / "all" / "latest"
    assert sorted(p.name for p in (out / "arith" / "seeds").iterdir()) == ["1"]
    proc = _regress("--suites", "arith", "--only", "fp32_to_bf16-ieee", "--seeds", "2",
                    "--until-covered", "--sim", "amaranth", "--inject", "starve-nan",
                    cwd=tmp_path)
    assert proc.returncode == 1
    assert "arith: 3 bins stayed empty after 2 seeds" in proc.stdout
    assert "below the goal of 100% with no seeds left" in proc.stderr


@pytest.mark.parametrize("args, message", [
    (["--seed", "3"], "--seed does not apply to regress all"),
    (["--suites", "arith,alu"], "alu is not a suite of regress all"),
    (["--until-covered"], "--until-covered adds seeds up to --seeds N"),
    (["--suites", "mxu", "--inject", "starve-nan"], "does nothing in suite mxu"),
])
def test_usage_errors_are_one_line_and_status_2(tmp_path, args, message):
    proc = _regress(*args, cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "build").exists()


def _regress_one(*args, cwd):
    env = dict(os.environ, TPU_RTL_CACHE=str((CHECKOUT / "build" / "sim").resolve()))
    return subprocess.run([sys.executable, "-m", "verif.cli", "regress", *args],
                          capture_output=True, text=True, cwd=cwd, env=env)


def test_one_suite_refuses_suites_and_needs_seeds_to_be_covered_until(tmp_path):
    proc = _regress_one("arith", "--suites", "arith", cwd=tmp_path)
    assert proc.returncode == 2 and "applies to regress all" in proc.stderr
    proc = _regress_one("arith", "--until-covered", cwd=tmp_path)
    assert proc.returncode == 2 and "give --seeds" in proc.stderr


@pytest.mark.slow
def test_one_suite_until_covered(tmp_path):
    proc = _regress_one("arith", "--only", "fp32_to_bf16-ieee", "--seeds", "3",
                        "--until-covered", "--sim", "amaranth", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "passed 1 of 1 seeds" in proc.stdout
    proc = _regress_one("arith", "--only", "fp32_to_bf16-ieee", "--seeds", "2",
                        "--until-covered", "--sim", "amaranth", "--inject", "starve-nan",
                        cwd=tmp_path)
    assert proc.returncode == 1 and "passed 2 of 2 seeds" in proc.stdout
    assert "3 bins stayed empty after 2 seeds: arith.fp32_to_bf16.ieee.a_class: +nan" in \
        proc.stdout
    assert "below the goal of 100% after 2 seeds" in proc.stderr


class _Toy(wiring.Component):
    a: In(4)
    b: In(4)
    y: Out(4)

    def elaborate(self, platform):
        m = Module()
        total = Signal(4)                                   # toy: total
        m.d.comb += total.eq(self.a + self.b)              # toy: sum
        flop = Signal(4)                                    # toy: flop
        with m.If(total[0]):                                # toy: if
            m.d.sync += flop.eq(total)
        m.d.comb += self.y.eq(flop)
        return m


def test_source_map_names_the_python_lines_of_the_verilog():
    here = Path(__file__).resolve()
    plain = convert(_Toy(), "toy")
    with _keeping_attributes():
        text = convert(_Toy(), "toy")
    assert 'src = "' not in convert(_Toy(), "toy")     # the export is itself again
    owners = source_map(text, plain, root=here.parent)
    lines = plain.splitlines()
    source = here.read_text().splitlines()
    tagged = {tag: next(n for n, line in enumerate(source, 1) if f"# toy: {tag}" in line)
              for tag in ("total", "sum", "flop")}
    name = f"{here.parent.name}/{here.name}"

    def owner(pattern):
        found = [owners.get(n) for n, line in enumerate(lines, 1) if re.search(pattern, line)]
        assert found, pattern
        return found

    assert set(owner(r"^\s*wire \[3:0\] total;")) == {f"{name}:{tagged['total']}"}
    assert set(owner(r"^\s*wire \[3:0\] flop;")) == {f"{name}:{tagged['flop']}"}
    # The adder (an operator: its own attribute) belongs to the statement using it.
    assert set(owner(r"^\s*assign \\\$1  = a \+ b;")) == {f"{name}:{tagged['sum']}"}
    # Yosys names the flop after the output it drives; its process, the enable branch
    # included, belongs to the flop's line.
    assert set(owner(r"^\s*y <= ")) == set(owner(r"^\s*if \(\\\$1 \[0\]\)")) == \
        {f"{name}:{tagged['flop']}"}
    # Yosys' marker (an empty `if` on a constant) is no one's: it can never be covered.
    assert owner(r"dump_module\$1 \) begin end") == [None]
    with pytest.raises(ValueError, match="does not align"):
        source_map(text, plain.replace("total", "tot", 1), root=here.parent)


def test_a_block_export_with_source_aligns_with_the_built_text():
    plain, attributed = export_with_source("fp32_to_bf16", {"numerics": "ieee"})
    owners = source_map(attributed, plain)
    lines = plain.splitlines()
    assert 'src = "' not in plain and 'src = "' in attributed
    assert owners and all(o.startswith("hdl/") for o in owners.values())
    # The rounding stage's output belongs to the rounding module.
    assert any(o.startswith("hdl/arith/rounding.py:") for n, o in owners.items()
               if lines[n - 1].lstrip().startswith("assign result ="))


def test_a_suite_none_of_whose_seeds_began_still_gets_its_reports(tmp_path):
    from verif.regress.runner import SuiteRun
    regression = SuiteRun("arith", "verilator", tmp_path / "never").finish(interrupted=True)
    assert regression.outcomes == [] and (tmp_path / "never" / "junit.xml").exists()


def test_a_toggle_hole_names_its_signal_as_amaranth_wrote_it():
    # Verilator escapes the "_", "." and "$" of Amaranth's names as __05F, __02e, __024.
    point = {"o": "core___05Freq___05Fpayload__02edata[17]:1->0",
             "h": "TOP.tb.dut.dut.dma.check"}
    assert source_coverage.signal_name(point) == "dma.check.core__req__payload.data"
    assert source_coverage.signal_name({"o": "q__02412:0->1", "h": "TOP.tb.dut.dut"}) == "q$12"


def test_points_without_a_source_line_are_counted_apart(tmp_path):
    key = "\x01f\x02/b/top.v\x01l\x02{line}\x01t\x02{kind}\x01o\x02{name}\x01h\x02top"
    dat = tmp_path / "run.dat"
    dat.write_text("# SystemC::Coverage-3\n"
                   f"C '{key.format(line=3, kind='toggle', name='x[0]:0->1')}' 5\n"
                   f"C '{key.format(line=3, kind='toggle', name='x[0]:1->0')}' 0\n"
                   f"C '{key.format(line=4, kind='branch', name='if')}' 0\n"
                   f"C '{key.format(line=4, kind='branch', name='else')}' 2\n"
                   f"C '{key.format(line=9, kind='line', name='block')}' 1\n"
                   f"C '{key.format(line=5, kind='toggle', name='z[0]:0->1')}' 0\n",
                   encoding="latin-1")
    (tmp_path / "run.src.json").write_text(json.dumps({"owners": {
        "3": "hdl/lib/params.py:2", "4": "hdl/lib/params.py:3", "5": "hdl/lib/params.py:99999",
        "9": "hdl/nothere.py:1"}}))
    coverage = source_coverage.collect([dat])
    assert dict(coverage.lines["hdl/lib/params.py"]) == {2: 5, 3: 2}
    assert dict(coverage.branches["hdl/lib/params.py"]) == {3: [0, 2]}
    assert coverage.toggles["hdl/lib/params.py"] == {2: (1, 2)}
    assert coverage.holes["hdl/lib/params.py"] == {2: {"x": 1}}       # the 1->0 of x[0]
    # A line past the end of its file and a file that does not exist own nothing.
    assert coverage.unowned == {"line": (1, 1), "branch": (0, 0), "toggle": (0, 1)}
    records = _lcov_records(source_coverage.write_lcov(coverage, tmp_path / "lcov.info"))
    assert records == {"hdl/lib/params.py": ({2: 5, 3: 2}, [(3, 0), (3, 2)])}


def test_a_source_bit_has_toggled_when_any_instance_of_any_build_toggled_it(tmp_path):
    """Two builds of one Python line, two instances in the first: a bit and transition
    counts once for the source, toggled if any copy toggled it; Verilator's own figures
    (per build and instance) still see four points of which one toggled."""
    key = "\x01f\x02/{build}/design.v\x01l\x023\x01t\x02toggle\x01o\x02{o}\x01h\x02{h}"
    for build, points in (("a", [("x[0]:0->1", "TOP.tb.dut.dut.lane0", 0),
                                 ("x[0]:0->1", "TOP.tb.dut.dut.lane1", 4),
                                 ("x[0]:1->0", "TOP.tb.dut.dut.lane0", 0),
                                 ("x[0]:1->0", "TOP.tb.dut.dut.lane1", 0)]),
                          ("b", [("x[0]:0->1", "TOP.tb.dut.dut", 0),
                                 ("x[0]:1->0", "TOP.tb.dut.dut", 0)])):
        (tmp_path / f"{build}.dat").write_text("# SystemC::Coverage-3\n" + "".join(
            f"C '{key.format(build=build, o=o, h=h)}' {n}\n" for o, h, n in points),
            encoding="latin-1")
        (tmp_path / f"{build}.src.json").write_text(json.dumps(
            {"owners": {"3": "hdl/lib/params.py:2"}}))
    coverage = source_coverage.collect([tmp_path / "a.dat", tmp_path / "b.dat"])
    assert coverage.toggles["hdl/lib/params.py"] == {2: (1, 2)}
    assert coverage.holes["hdl/lib/params.py"] == {2: {"x": 1}}        # x[0]'s 1->0
    assert dict(coverage.lines["hdl/lib/params.py"]) == {2: 4}
    verilog = code_coverage.merge([tmp_path / "a.dat", tmp_path / "b.dat"])
    assert code_coverage.summary(verilog) == {"toggle": (1, 6)}


def test_the_closure_table_colours_a_suite_without_seeds_as_neither_pass_nor_fail():
    from types import SimpleNamespace

    from verif.regress import html
    assert html._passed_class(SimpleNamespace(outcomes=[], failed=[])) == "none"
    assert html._passed_class(SimpleNamespace(outcomes=["1"], failed=[])) == "ok"
    assert html._passed_class(SimpleNamespace(outcomes=["1", "2"], failed=["2"])) == "bad"


class _ArithFirst(Executor):
    """Reports every call as lost, always the first waiting arith seed before any other:
    so the order of reports shows when each suite's next round was queued."""

    def describe(self):
        return "scripted"

    def seed_call(self, task, folder):
        return Call(f"{task.suite}-seed-{task.seed}", print)

    def run(self, calls, on_result, *, on_tick=None):
        self.reported, self.rounds, waiting = [], [[c.name for c in calls]], list(calls)
        while waiting:
            call = next((c for c in waiting if c.name.startswith("arith")), waiting[0])
            waiting.remove(call)
            self.reported.append(call.name)
            queued = list(on_result(call, Lost("scripted")) or ())
            self.rounds += [[c.name for c in queued]] if queued else []
            waiting += queued


def test_until_covered_queues_a_suites_next_round_when_its_own_round_ends(tmp_path):
    """arith's rounds go on while mxu's first round still runs: no round waits on another
    suite's seeds (each seed here is lost, so no suite reaches the goal)."""
    executor = _ArithFirst()
    campaign.run_all(seeds=3, suites=["arith", "mxu"], until_covered=True, step=1,
                     executor=executor, out=tmp_path / "run", report_link=False)
    assert executor.reported == ["arith-seed-1", "arith-seed-2", "arith-seed-3",
                                 "mxu-seed-1", "mxu-seed-2", "mxu-seed-3"]


def test_until_covered_shares_the_workers_among_the_suites_still_going(tmp_path):
    """Two workers: a seed a round for each of two suites, then two a round for the one
    left (rounds of one would leave a worker idle)."""
    executor = _ArithFirst()
    campaign.run_all(seeds=5, suites=["arith", "mxu"], until_covered=True, step=2,
                     executor=executor, out=tmp_path / "run", report_link=False)
    assert executor.rounds == [["arith-seed-1", "mxu-seed-1"], *(
        [f"arith-seed-{seed}"] for seed in range(2, 6)), ["mxu-seed-2", "mxu-seed-3"],
        ["mxu-seed-4", "mxu-seed-5"]]


def test_the_local_executor_runs_the_calls_a_result_asks_for():
    reported = []

    def on_result(call, value):
        reported.append((call.name, value))
        return [Call("again", abs, (-2,))] if call.name == "first" else ()
    with LocalExecutor(jobs=2) as executor:
        executor.run([Call("first", abs, (-1,)), Call("second", abs, (-3,))], on_result)
    assert sorted(reported) == [("again", 2), ("first", 1), ("second", 3)]


def test_the_summary_table_keeps_its_columns_for_a_long_suite_name(tmp_path):
    from types import SimpleNamespace
    none = SimpleNamespace(outcomes=["1", "2"], failed=[], code_coverage=None)
    table = campaign.summary_table(campaign.Campaign(
        tmp_path, "verilator", {"arith": none, "system_embedding": none})).splitlines()
    end = table[0].index("seeds") + len("seeds")        # the seeds column is right-aligned
    rows = [line for line in table[1:] if not line.startswith("-")]
    assert [row.split()[0] for row in rows] == ["arith", "system_embedding", "all"]
    assert all(row[end - 1].isdigit() and row[end] == " " for row in rows), table
