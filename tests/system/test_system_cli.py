"""``tpu-rtl system`` and the system part of ``tpu-rtl demo``: the table, the verdicts, the
heat map, and one-line errors. The runs use the 2x2 build of the other system tests."""

import numpy as np
import pytest

from sim import system
from verif import cli, demo
from verif.cli.common import parse_size
from verif.suites.system.inputs import random_inputs


@pytest.mark.slow
def test_collective_prints_a_checked_table_and_writes_a_heat_map(tmp_path, capsys):
    status = cli.main(["system", "collective", "all_gather", "--topology", "2x2",
                       "--sizes", "256:1KiB", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 0
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [row[0] for row in rows] == ["256", "512", "1,024"]
    # No wrong words: "#wrong" is the column before the chunks chosen, the last.
    header = next(line for line in out.splitlines() if "#wrong" in line)
    assert header.split()[-2:] == ["#wrong", "chunks"], header
    assert all(row[-2] == "0" for row in rows), out
    assert (tmp_path / "links_all_gather_2x2.png").stat().st_size > 1000


@pytest.mark.slow
def test_a_wrong_word_fails_the_command_with_a_reproducer(monkeypatch, tmp_path, capsys):
    real = system.collective

    def corrupt(*args, **kwargs):
        run = real(*args, **kwargs)
        run.out.view(np.uint32).ravel()[3] ^= 1
        return run
    monkeypatch.setattr(system, "collective", corrupt)
    status = cli.main(["system", "collective", "all_to_all", "--topology", "2x2",
                       "--size", "256", "--out", str(tmp_path)])
    captured = capsys.readouterr()
    assert status == 1
    assert "mismatch: 4 wrong words" in captured.err               # one in each of 4 sizes
    assert "tpu-rtl system collective all_to_all --topology 2x2" in captured.err


@pytest.mark.parametrize("args, status, message", [
    (["--topology", "2by2"], 2, "--topology looks like 4x4"),
    (["--size", "3"], 2, "at least one 4-byte word"),
    (["--size", "12XB"], 2, "a size looks like"),
    (["--sizes", "4KiB:1KiB"], 2, "from low to high"),
    (["--chunks", "0"], 2, "argument --chunks: must be a positive integer or auto, not '0'"),
    (["--chunks", "many"], 2, "argument --chunks: must be a positive integer or auto, not 'many'"),
    (["--fail", "9"], 2, "chip 9 is outside 0..3"),
    (["--twist"], 2, "a twisted torus is"),
    (["--network-ports", "13"], 2, "network_ports must be at most 12, not 13"),
    (["--network-ports", "0"], 2, "argument --network-ports: must be a positive integer, not 0"),
    (["--routing", "dor", "--vcs", "1"], 2, "--vcs 1: vcs must be at least 2, at most 8"),
    # The 2x2's default chip routes adaptively (a ring of two chips on each axis).
    (["--vcs", "2"], 2, "--vcs 2: adaptive routing needs more than 2 VCs (its escape VCs)"),
    (["--buffer-flits", "64"], 2, "--buffer-flits 64: adaptive routing cuts whole packets "
                                  "through, so a buffer must hold the longest, 66 flits"),
    (["--routing", "minimal"], 2, "argument --routing: invalid choice: 'minimal'"),
    (["--speedup", "5"], 2, "--speedup 5 needs as many VCs to deal to its groups: at most "
                            "--vcs (4)"),
    (["--speedup", "0"], 2, "argument --speedup: must be a positive integer, not 0"),
    (["--buffer-flits", "0"], 2, "argument --buffer-flits: must be a positive integer, not 0"),
    (["--outstanding", "0"], 2, "argument --outstanding: must be a positive integer, not 0"),
    (["--waves", "run.txt"], 2, "--waves run.txt: name a .vcd or .fst file"),
])
def test_bad_arguments_are_one_line_errors(args, status, message, capsys):
    assert cli.main(["system", "collective", "all_reduce", *args]) == status
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_chip_options_reach_the_run_and_the_header(monkeypatch, capsys):
    seen = []

    def record(*args, **kwargs):
        seen.append(kwargs["chip"])
        raise system.SystemRunError("stopped by the test")
    monkeypatch.setattr(system, "collective", record)
    assert cli.main(["system", "collective", "all_reduce", "--topology", "4x4",
                     "--network-ports", "2"]) == 1
    captured = capsys.readouterr()
    # Two ports: the rule's lanes for them (8) and VMEM lines for those lanes (2**19 / 8).
    assert [(c["network_ports"], c["lanes"], c["vmem_lines"]) for c in seen] == [(2, 8, 65536)]
    assert ("chips of 2 network ports, 8 lanes and 524,288 VMEM words, dor routing (the "
            "default for given chips) with 2 VCs of 8 flits a link") in captured.out
    assert "stopped by the test" in captured.err
    # No chip option: the run takes sim.system.collective's own default chip.
    assert cli.main(["system", "collective", "all_reduce", "--topology", "4x4"]) == 1
    assert seen[-1] is None
    assert ("chips of 4 network ports, 16 lanes and 524,288 VMEM words (the default for the "
            "topology), dor routing (the default for the topology)") in capsys.readouterr().out


def test_router_and_dma_options_reach_the_run_and_the_header(monkeypatch, capsys):
    seen = []

    def record(*args, **kwargs):
        seen.append({name: kwargs.get(name)
                     for name in ("chip", "vcs", "buffer_flits", "speedup")})
        raise system.SystemRunError("stopped by the test")
    monkeypatch.setattr(system, "collective", record)
    assert cli.main(["system", "collective", "all_to_all", "--topology", "4x4",
                     "--outstanding", "8", "--vcs", "4", "--buffer-flits", "72",
                     "--speedup", "2"]) == 1
    assert [(c["chip"]["outstanding"], c["chip"]["network_ports"], c["vcs"], c["buffer_flits"],
             c["speedup"]) for c in seen] == [(8, 4, 4, 72, 2)]
    assert "4 VCs of 72 flits a link, speed-up 2;" in capsys.readouterr().out


def test_waves_record_the_largest_size_only(monkeypatch, tmp_path, capsys):
    from golden import collectives
    seen = []

    def answer(kind, inputs, *, topology, waves, **kwargs):
        seen.append((inputs.shape[1], waves))
        return system.CollectiveRun(
            out=collectives.collective(kind, inputs, topology=topology), cycles=100,
            algbw=1.0, busbw=1.0, bus_bound=16.0, link_utilization=np.zeros((4, 4)))
    monkeypatch.setattr(system, "collective", answer)
    waves = str(tmp_path / "run.fst")
    assert cli.main(["system", "collective", "all_gather", "--topology", "2x2", "--sizes",
                     "256:512", "--waves", waves, "--out", str(tmp_path)]) == 0
    # all_gather's S is 4*C*n bytes: n = 16 and 32 words.
    assert seen == [(16, None), (32, waves)]
    assert f"waves (512 B): {waves}" in capsys.readouterr().out


def test_the_topologys_routing_goes_with_its_default_chip(monkeypatch, capsys):
    seen = []

    def record(*args, **kwargs):
        seen.append({name: kwargs.get(name) for name in ("chip", "routing", "vcs",
                                                          "buffer_flits")})
        raise system.SystemRunError("stopped by the test")
    monkeypatch.setattr(system, "collective", record)
    # 2x2x2: rings of two chips, so the default chip comes with adaptive routing, and its
    # routers with 4 VCs of one and a half 66-flit packets.
    assert cli.main(["system", "collective", "all_reduce", "--topology", "2x2x2"]) == 1
    assert seen[-1] == dict(chip=None, routing="adaptive", vcs=4, buffer_flits=99)
    assert ("adaptive routing (the default for the topology) with 4 VCs of 99 flits a link"
            in capsys.readouterr().out)
    # A chip option: the given chip routes by dimension order unless told.
    assert cli.main(["system", "collective", "all_reduce", "--topology", "2x2x2",
                     "--lanes", "16"]) == 1
    assert (seen[-1]["routing"], seen[-1]["vcs"], seen[-1]["buffer_flits"]) == ("dor", 2, 8)
    assert cli.main(["system", "collective", "all_reduce", "--topology", "2x2x2",
                     "--lanes", "16", "--routing", "adaptive", "--vcs", "3"]) == 1
    assert (seen[-1]["routing"], seen[-1]["vcs"], seen[-1]["buffer_flits"]) == \
        ("adaptive", 3, 99)


def test_sizes_and_inputs():
    assert [parse_size(t) for t in ("4096", "16KiB", "1M", "8 kb")] == \
        [4096, 16384, 1 << 20, 8192]
    rng = np.random.default_rng(0)
    assert random_inputs("all_to_all", 4, 1024, "float32", rng).shape == (4, 4, 64)
    assert random_inputs("all_gather", 4, 1024, "int32", rng).shape == (4, 64)
    assert random_inputs("all_reduce", 4, 1024, "int32", rng).shape == (4, 256)


@pytest.mark.slow
def test_system_demo_is_bit_exact_and_says_so(tmp_path):
    lines = []
    assert demo.system_demo(seed=1, out=lines.append, plots=tmp_path)
    text = "\n".join(lines)
    assert text.count("bit-exact") == 3 and "MISMATCH" not in text
    for step in ("data-parallel step", "all_reduce", "all_to_all"):
        assert step in text
    assert (tmp_path / "links_all_reduce_2x2.png").exists()


@pytest.mark.slow
def test_system_demo_reports_a_mismatch(monkeypatch, tmp_path):
    from golden import collectives
    good = collectives.collective
    monkeypatch.setattr(collectives, "collective",
                        lambda *a, **k: good(*a, **k) ^ np.uint32(1))
    lines = []
    assert not demo.system_demo(seed=1, out=lines.append, plots=tmp_path)
    assert "\n".join(lines).count("MISMATCH") == 3



def _step_on_the_golden_system(corrupt=0):
    """A stand-in for ``sim.system.data_parallel_step``: the same programs on the golden
    system instead of the RTL (``tests/system/test_data_parallel.py`` runs those), with
    ``corrupt`` words of the all-reduce flipped."""
    from golden.system import run_system
    from sim.kernels.data_parallel import plan_data_parallel

    def step(shards, w, *, topology, activation, numerics, chunks, backend, seed, waves,
             progress, routing, vcs, buffer_flits, speedup):
        step.routers = dict(routing=routing, vcs=vcs, buffer_flits=buffer_flits,
                            speedup=speedup)
        plan = plan_data_parallel(shards, w, topology=topology, activation=activation,
                                  chunks=chunks)
        run = run_system(plan.programs, vmem=plan.vmem, smem=plan.smem, hbm=plan.hbm,
                         n_chips=topology.n_chips, n_flags=plan.n_flags,
                         vmem_lines=plan.vmem_lines, numerics=numerics)
        out = plan.result(run.vmem)
        out.ravel()[:corrupt] ^= 1
        products = np.stack([plan.matmul.result(run.hbm[c]) for c in plan.collective.chips])
        return system.StepRun(out=out.view(np.float32), products=products.view(np.float32),
                              cycles=1234, link_utilization=np.zeros((topology.n_chips, 4)))
    return step


@pytest.mark.parametrize("extra", [[], ["--relu", "--numerics", "ieee", "--chunks", "2"]])
def test_step_checks_products_and_all_reduce(monkeypatch, tmp_path, capsys, extra):
    monkeypatch.setattr(system, "data_parallel_step", _step_on_the_golden_system())
    assert cli.main(["system", "step", "--topology", "2x2", "--batch", "32", "--k", "9",
                     "--n", "4", "--out", str(tmp_path), *extra]) == 0
    out = capsys.readouterr().out
    assert "32x9 @ 9x4 a chip" in out
    assert out.splitlines()[2].split() == ["1,234", "0", "0"]
    assert (tmp_path / "links_step_2x2.png").exists()


def test_a_wrong_step_word_fails_with_a_reproducer(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(system, "data_parallel_step", _step_on_the_golden_system(corrupt=3))
    assert cli.main(["system", "step", "--seed", "7", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "mismatch: 0 wrong product words, 3 wrong all-reduce words" in err
    assert "tpu-rtl system step --topology 2x2 --batch 16 --k 24 --n 8 --numerics tpu " \
           "--chunks 1 --seed 7" in err


def test_router_options_reach_the_step_its_header_and_its_reproducer(monkeypatch, tmp_path,
                                                                     capsys):
    step = _step_on_the_golden_system(corrupt=1)
    monkeypatch.setattr(system, "data_parallel_step", step)
    assert cli.main(["system", "step", "--routing", "adaptive", "--speedup", "2", "--out",
                     str(tmp_path)]) == 1
    assert step.routers == dict(routing="adaptive", vcs=4, buffer_flits=99, speedup=2)
    captured = capsys.readouterr()
    assert "adaptive routing with 4 VCs of 99 flits a link, speed-up 2;" in captured.out
    # The reproducer names the options given (their defaults follow from them).
    assert "--chunks 1 --routing adaptive --speedup 2 --seed 0" in captured.err


@pytest.mark.parametrize("args, status, message", [
    (["--batch", "0"], 2, "argument --batch: must be a positive integer, not 0"),
    (["--speedup", "3"], 2, "--speedup 3 needs as many VCs to deal to its groups: at most "
                            "--vcs (2)"),
    (["--batch", "3"], 2, "the all-reduce of 3x8 products"),
    (["--topology", "2by2"], 2, "--topology looks like 4x4"),
])
def test_bad_step_arguments_are_one_line_errors(args, status, message, capsys):
    assert cli.main(["system", "step", *args]) == status
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
