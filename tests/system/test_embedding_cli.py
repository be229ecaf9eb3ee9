"""``tpu-rtl system embedding``: the verdict, cycles, row reads and ICI words, the heat map,
a reproducer on a mismatch, and one-line usage errors."""

import numpy as np
import pytest

from sim import system
from verif import cli

ARGS = ["system", "embedding", "--topology", "2x2", "--rows", "40", "--dim", "8", "--batch",
        "3", "--bag", "3", "--backend", "amaranth"]


@pytest.mark.slow
def test_the_step_prints_its_verdict_and_writes_a_heat_map(tmp_path, capsys):
    status = cli.main(ARGS + ["--optimizer", "adagrad", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 0
    row = next(line.split() for line in out.splitlines() if "bit-exact" in line)
    reads, ids, words, no_dedup = (int(x.replace(",", "")) for x in row[2:6])
    assert reads <= ids == 4 * 3 * 3 and words <= no_dedup
    assert (tmp_path / "links_embedding_2x2.png").stat().st_size > 1000


@pytest.mark.slow
def test_a_wrong_word_fails_with_a_reproducer(monkeypatch, tmp_path, capsys):
    real = system.embedding_step

    def corrupt(*args, **kwargs):
        run = real(*args, **kwargs)
        run.table.view(np.uint32)[0, 0] ^= 1
        return run
    monkeypatch.setattr(system, "embedding_step", corrupt)
    status = cli.main(ARGS + ["--forward", "--out", str(tmp_path)])
    captured = capsys.readouterr()
    assert status == 1
    assert "mismatch: 1 wrong words against golden.embedding" in captured.err
    assert "tpu-rtl system embedding --topology 2x2 --rows 40" in captured.err


def test_router_options_reach_the_step_and_the_header(monkeypatch, tmp_path, capsys):
    seen = []

    def record(*args, **kwargs):
        seen.append({name: kwargs[name] for name in ("routing", "vcs", "buffer_flits",
                                                     "speedup")})
        raise system.SystemRunError("stopped by the test")
    monkeypatch.setattr(system, "embedding_step", record)
    assert cli.main(ARGS + ["--out", str(tmp_path)]) == 1
    assert "dor routing with 2 VCs of 8 flits a link;" in capsys.readouterr().out
    assert cli.main(ARGS + ["--routing", "adaptive", "--speedup", "4", "--out",
                            str(tmp_path)]) == 1
    assert "adaptive routing with 4 VCs of 99 flits a link, speed-up 4;" in \
        capsys.readouterr().out
    assert seen == [dict(routing="dor", vcs=2, buffer_flits=8, speedup=1),
                    dict(routing="adaptive", vcs=4, buffer_flits=99, speedup=4)]


@pytest.mark.parametrize("flags, message", [
    (["--alpha", "-1"], "argument --alpha: must be a finite number >= 0, not -1"),
    (["--speedup", "4"], "--speedup 4 needs as many VCs to deal to its groups: at most "
                         "--vcs (2)"),
    (["--routing", "adaptive", "--vcs", "2"], "--vcs 2: adaptive routing needs more than 2 "
                                              "VCs (its escape VCs)"),
    (["--vcs", "9"], "--vcs 9: vcs must be at least 2, at most 8"),
    (["--rows", "0"], "--rows"),
    (["--combiner", "max"], "--combiner"),
])
def test_usage_errors_are_one_line_with_status_2(flags, message, tmp_path, capsys):
    status = cli.main(ARGS + flags + ["--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert message in err[-1]
