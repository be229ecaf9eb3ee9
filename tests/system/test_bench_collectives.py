"""``tpu-rtl bench collectives``' document: the goals' verdicts, the compared routing's
rows without one, and the section written between its markers (fabricated rows: the
runs themselves are the bench's)."""

from verif.bench import collectives as bench
from verif.report import write_marked


def _row(label, goal, fraction, routing):
    return dict(label=label, goal=goal, size=65536, ports=6, lanes=32, routing=routing,
                chunks=2, cycles=5000, predicted=4900.0, busbw=24 * fraction, bound=24.0,
                fraction=fraction)


def test_the_goal_rows_say_met_or_not_and_the_compared_row_says_nothing(tmp_path):
    goals = [_row("2x2x2 all-reduce", 0.80, 0.812, "adaptive"),
             _row("4x4 all-reduce", 0.85, 0.5, "dor"),
             _row("2x2x2 all-reduce", None, 0.45, "dor")]
    sweep = [dict(size=1024, chunks=1, cycles=100, busbw=1.0, fraction=0.1)]
    text = bench._markdown(goals, sweep, "img/x.png", seed=1, backend="verilator")
    lines = text.splitlines()
    assert "| 2x2x2 all-reduce | 65,536 | 6, 32 | adaptive | 2 | 5,000 | 4,900 | 19.488 | " \
           "24.00 | 0.812 | >= 0.80 met |" in lines
    assert "| 4x4 all-reduce | 65,536 | 6, 32 | dor | 2 | 5,000 | 4,900 | 12.000 | 24.00 | " \
           "0.500 | >= 0.85 **not met** |" in lines
    assert "| 2x2x2 all-reduce | 65,536 | 6, 32 | dor | 2 | 5,000 | 4,900 | 10.800 | 24.00 | " \
           "0.450 |  |" in lines
    path = tmp_path / "system.md"
    path.write_text(f"# A\n\nbefore\n{bench.BEGIN}\nSTALE\n{bench.END}\nafter\n")
    write_marked(path, text, begin=bench.BEGIN, end=bench.END)
    written = path.read_text()
    assert "STALE" not in written and written.startswith("# A\n\nbefore\n")
    assert written.endswith(f"{bench.END}\nafter\n") and text in written


def test_every_compared_run_names_a_goal():
    labels = {label for label, *_ in bench.GOALS}
    assert {label for label, _ in bench.COMPARED} <= labels
