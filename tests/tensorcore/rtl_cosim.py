"""Long co-simulation of hdl.tensorcore.TensorCore with golden.tensorcore.run, kept out of the
default tests: an 8-lane VPU with its 8x8 MXU takes about half a minute to build in
Amaranth's simulator. Run it as::

    nice -n 10 .venv/bin/python -m tests.tensorcore.rtl_cosim --programs 20 --seed 1

Every program's seed is printed with a failure.
"""

import argparse
import sys
import time

import numpy as np

from golden import tensorcore as tc
from golden.formats import NUMERICS

from .rtl_harness import CoreRunner, LocalCore, compare
from .rtl_programs import initial_sregs, mxu_program, scalar_program, vector_slots

SMEM, IMEM, VMEM_LINES, N_FLAGS, RESULTS = 64, 64, 32, 8, 16
OPS = ("add", "mul", "max", "select", "f32_to_bf16", "bf16_to_f32")
SPECIALS = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001,
                     0x807FFFFF, 0x3F800000, 0x00400000, 0x7F7FFFFF, 0x0000FFFF, 0x00017F80],
                    np.uint32)


def _data(rng, n):
    words = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    special = rng.random(n) < 0.3
    words[special] = rng.choice(SPECIALS, int(special.sum()))
    return words


def cosim_mxu(*, programs, seed, numerics="tpu", lanes=8, log=print):
    """Run ``programs`` seeded random programs (half MXU-heavy straight-line code, half
    branchy vector programs) on an MXU core and the ISS; raises AssertionError naming the
    seed of the first mismatch. Returns the stop reasons seen."""
    start = time.perf_counter()
    runner = CoreRunner(LocalCore(imem_depth=IMEM, smem_words=SMEM, n_flags=N_FLAGS,
                                   lanes=lanes, numerics=numerics, vmem_lines=VMEM_LINES,
                                   mxu=True, mxu_results=RESULTS, ops=OPS))
    log(f"build: {time.perf_counter() - start:.1f} s")
    stops = {}
    for k, program_seed in enumerate(np.random.default_rng(seed).integers(0, 1 << 32,
                                                                          programs).tolist()):
        rng = np.random.default_rng(program_seed)
        sregs = initial_sregs(rng, SMEM)
        if k % 2 == 0:
            text = mxu_program(rng, lanes=lanes, smem_words=SMEM, vmem_lines=VMEM_LINES,
                               mxu_results=RESULTS, ops=OPS, n_flags=N_FLAGS,
                               fault=0.0 if k % 4 == 0 else 0.03)
        else:
            text = scalar_program(rng, smem_words=SMEM, n_flags=N_FLAGS, blocks=8,
                                  extra=vector_slots(OPS, vmem_lines=VMEM_LINES, mxu=True))
        smem, vmem = _data(rng, SMEM), _data(rng, VMEM_LINES * lanes)
        vregs = _data(rng, 32 * 8 * lanes).reshape(32, 8, lanes)
        rtl = runner.run(text, smem=smem, sregs=sregs, vmem=vmem, vregs=vregs,
                         max_cycles=20_000)
        iss = tc.run(text, smem=smem, sregs=sregs, vmem=vmem, vregs=vregs, imem_bundles=IMEM,
                     lanes=lanes, n_flags=N_FLAGS, mxu_results=RESULTS, numerics=numerics)
        compare(rtl, iss, context=f"{numerics}, program seed {program_seed} of seed {seed}:"
                                  f"\n{text}")
        stops[iss.error] = stops.get(iss.error, 0) + 1
        log(f"program {k} (seed {program_seed}): {iss.status} {iss.error}, "
            f"{iss.bundles} bundles, {rtl.cycles} cycles")
    return stops


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--numerics", choices=NUMERICS, default=None,
                        help="one mode (default: both)")
    args = parser.parse_args(argv)
    for numerics in [args.numerics] if args.numerics else NUMERICS:
        try:
            stops = cosim_mxu(programs=args.programs, seed=args.seed, numerics=numerics)
        except AssertionError as error:
            print(f"MISMATCH ({numerics}): {error}", file=sys.stderr)
            return 1
        print(f"{numerics}: {args.programs} programs match; stops {stops}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
