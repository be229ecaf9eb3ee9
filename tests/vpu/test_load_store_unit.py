"""hdl.vpu.LoadStoreUnit alone, with memories of its ports' own latencies: loaded vregs come
back in program order when the window port answers sooner than the line port."""

from hdl.vpu.load_store_unit import LoadStoreUnit

from ..support import simulate

LINES, SLOW = 64, 5              # the line port answers SLOW cycles after a request


def test_loads_write_back_in_program_order_when_the_line_port_is_slower(rng):
    """Loads dealt at random to the two ports (stride 1: window; others: line by line)
    with stores between, on a line port that answers 5 cycles late and a window port that
    answers the next cycle: each load's writeback carries its own destination and the lines
    as the requests before it left them (a model of the memory), in program order."""
    lsu = LoadStoreUnit(lanes=1, vmem_lines=LINES, window=8)
    start = [int(x) for x in rng.integers(0, 1 << 32, LINES)]
    program = []
    for k in range(40):
        stride = int(rng.choice([1, 1, 2, 3]))
        program.append(dict(store=bool(rng.random() < 0.3), dest=k % 32, stride=stride,
                            base=int(rng.integers(0, LINES - 7 * stride)),
                            src=[int(x) for x in rng.integers(0, 1 << 32, 8)]))
    memory, want = list(start), []          # the loads' lines, in program order
    for op in program:
        lines = [op["base"] + s * op["stride"] for s in range(8)]
        if op["store"]:
            for s, line in enumerate(lines):
                memory[line] = op["src"][s]
        else:
            want.append((op["dest"], [memory[line] for line in lines]))
    got = []

    async def tb(ctx):
        model = list(start)                         # the memory as the requests leave it
        slow = []                                   # (due cycle, word) of the line port
        wide = None                                 # the window port's answer, next cycle
        cycle, issued = 0, 0
        ctx.set(lsu.vmem.req.ready, 1)
        ctx.set(lsu.window.req.ready, 1)
        while len(got) < len(want):
            assert cycle < 2000, "the load/store unit stopped"
            if issued < len(program):
                op = program[issued]
                ctx.set(lsu.issue.valid, 1)
                ctx.set(lsu.issue.payload, {**{k: op[k] for k in
                                               ("store", "dest", "base", "stride")},
                                            "src": sum(w << (32 * s)
                                                       for s, w in enumerate(op["src"]))})
            else:
                ctx.set(lsu.issue.valid, 0)
            answer = slow[0][1] if slow and slow[0][0] == cycle else None
            ctx.set(lsu.vmem.resp.valid, answer is not None)
            ctx.set(lsu.vmem.resp.payload.data, [answer or 0])
            ctx.set(lsu.window.resp.valid, wide is not None)
            ctx.set(lsu.window.resp.payload.data, wide or [0] * 8)
            _, _, taken, line_valid, req, wide_valid, wreq, back_valid, back = \
                await ctx.tick().sample(lsu.issue.ready, lsu.vmem.req.valid,
                                        lsu.vmem.req.payload, lsu.window.req.valid,
                                        lsu.window.req.payload, lsu.writeback.valid,
                                        lsu.writeback.payload)
            if issued < len(program) and taken:
                issued += 1
            if answer is not None:
                slow.pop(0)
            wide = None
            if back_valid:
                got.append((int(back.dest), [int(back.data) >> (32 * s) & 0xFFFFFFFF
                                             for s in range(8)]))
            if line_valid:
                addr = int(req.addr)
                if req.write:
                    model[addr] = int(req.data[0])
                else:
                    due = max(cycle + SLOW, slow[-1][0] + 1 if slow else 0)
                    slow.append((due, model[addr]))
            if wide_valid:
                addr = int(wreq.addr)
                if wreq.write:
                    model[addr:addr + 8] = [int(w) for w in wreq.data]
                else:
                    wide = model[addr:addr + 8]
            cycle += 1

    simulate(lsu, tb)
    assert len(want) > 20 and got == want
