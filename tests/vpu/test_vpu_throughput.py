"""The VPU's stated throughputs, cycle by cycle in the Amaranth simulation: back-to-back
pushes stream one MXU row a cycle, a weight tile loads beside them, pops keep pace, and
back-to-back ``vld`` keep one VMEM line a cycle going.

These are the docstrings' throughput and stall rules (``hdl.vpu.mxu_link``,
``hdl.vpu.load_store_unit``), checked as cycle counts of one small program each; speed in
wall-clock time is for ``tpu-rtl bench``.
"""


from golden import vpu as golden
from hdl.vpu import VPUSystem
from sim.backends.kept_simulations import KeptSimulation, design_key, kept_simulation, run_kept


def _beats(lines):
    """Program beats as the TensorCore's vector queue sends them: each line's words, two
    a beat."""
    beats = []
    for line in lines:
        words = [int(w) for w in golden.program_words(golden.assemble(line.replace("|", "\n")))]
        beats += [words[i:i + 2] for i in range(0, len(words), 2)]
    return beats


def _trace(lines, signals, *, cycles):
    """Play ``lines`` into an 8-lane VPU with its MXU (88 result rows: 11 pushes' worth) and
    VMEM; per cycle, for each name in ``signals`` (a function of the system), whether that
    stream transferred. The three tests share one compiled simulation."""
    params = dict(lanes=8, mxu_results=88, ops=("xor",))
    key = design_key(VPUSystem, params)
    sim = kept_simulation(key, lambda: KeptSimulation(VPUSystem(**params)))
    dut = sim.top
    trace = {name: [] for name in signals}

    async def play(ctx):
        for beat in _beats(lines):
            ctx.set(dut.program.payload.count, len(beat))
            for k, word in enumerate(beat):
                ctx.set(dut.program.payload.words[k], word)
            ctx.set(dut.program.valid, 1)
            await ctx.tick().until(dut.program.ready)
        ctx.set(dut.program.valid, 0)

    async def watch(ctx):
        for _ in range(cycles):
            await ctx.tick()
            for name, stream in signals.items():
                port = stream(dut)
                trace[name].append(bool(ctx.get(port.valid) and ctx.get(port.ready)))

    run_kept(key, sim, play, watch)
    return trace


def _runs(flags):
    """The lengths of the runs of consecutive transfers."""
    runs, length = [], 0
    for flag in flags + [False]:
        if flag:
            length += 1
        elif length:
            runs.append(length)
            length = 0
    return runs


def test_pushes_stream_back_to_back_while_a_weight_tile_loads():
    # A weight tile, 7 LHS pushes through it, the next tile pushed during the seventh (once
    # the first swap has reached every PE: 49 cycles on an 8x8 MXU), and 4 LHS pushes
    # swapping it in. No pops are due (the queue holds every row), so the LHS rows are one
    # unbroken run but for the swap's wait for the whole tile.
    lines = ["push_weights v0"] + ["push_lhs v1"] * 7 + ["push_weights v2"] + \
        ["push_lhs v1"] * 4
    trace = _trace(lines, {"lhs": lambda d: d.vpu.mxu_lhs, "weights": lambda d: d.vpu.mxu_weights},
                   cycles=150)
    lhs, weights = trace["lhs"], trace["weights"]
    assert sum(lhs) == 88 and sum(weights) == 16
    # The second tile loads while the seventh push's rows stream: the two streams overlap.
    assert any(a and b for a, b in zip(lhs, weights))
    # 56 rows, then the swap waits at most a couple of cycles for the whole tile.
    runs = _runs(lhs)
    assert runs[0] >= 56, runs
    first_gap = lhs.index(False, lhs.index(True) + runs[0])
    assert lhs.index(True, first_gap) - first_gap <= 2, runs


def test_pops_keep_pace_with_pushes():
    # Pops trail pushes by 9 (an 8x8 MXU returns a push's last row 8 + 66 cycles after it
    # issues): 24 pushes, each with the pop of the push 9 before, stream without a gap.
    lines = ["push_weights v0"]
    for i in range(24):
        lines.append(f"push_lhs v1 | pop v{3 + i % 8}" if i >= 9 else "push_lhs v1")
    trace = _trace(lines, {"lhs": lambda d: d.vpu.mxu_lhs}, cycles=300)
    assert _runs(trace["lhs"]) == [8 * 24]


def test_loads_stream_one_line_a_cycle():
    lines = [f"vld v{1 + k}, {8 * k}, 1" for k in range(6)]
    trace = _trace(lines, {"vmem": lambda d: d.vpu.vmem.req}, cycles=80)
    assert _runs(trace["vmem"]) == [48]
