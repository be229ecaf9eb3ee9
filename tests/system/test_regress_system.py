"""The ``system`` regression suite (``verif.suites.system``): the first four seeds deal every
link set; one case of seed 1 (the 2x2 build the other system tests share) passes on
Verilator and samples its coverage; with the golden fault injected it fails, naming its
seed, build, case and the command to rerun it. Whole seeds run in ``tpu-rtl regress
system``."""

import pytest

from verif.regress import functional_summary
from verif.regress.worker import run_seed
from verif.suites.system import stimulus


def test_seeds_1_to_4_deal_every_link_set_and_the_asymmetric_one_slows_one_port():
    builds = [stimulus.build(seed) for seed in range(1, 5)]
    assert {b.link for b in builds} == set(stimulus.LINKS)
    (asym,) = [b for b in builds if b.link == "asymmetric"]
    assert asym.link_params == {"vcs": 2, "buffer_flits": 1, "link_latency": (6, 2, 2, 2)}
    # The slow port is the + port of the first axis with more than one chip.
    assert stimulus.link_latency("1x4", (6, 2)) == (2, 2, 6, 2)
    assert stimulus.link_latency("2x2x2", (6, 2)) == (6, 2, 2, 2, 2, 2)
    assert stimulus.link_latency("2x2", 4) == 4


@pytest.mark.slow
def test_one_case_passes_and_records_coverage(tmp_path):
    record = run_seed("system", 1, "verilator", tmp_path, only="case00.")
    assert record["status"] == "pass", record
    (case,) = [c for c in record["cases"] if c["checked"]]
    assert case["case"].startswith("case00.") and case["mismatches"] == 0
    assert case["cycles"] > 0
    (report,) = tmp_path.glob("case00.*.cov.xml")
    _, text = functional_summary(report)
    # One case: 2x2, all_reduce, float32, tpu, one chunking, link set and size class.
    assert "(9 of 46 bins)" in text, text
    for covered in ("system.topology: 2x2\n", "system.kind: all_reduce\n",
                    "system.dtype: float32\n", "system.numerics: tpu\n"):
        assert covered not in text, text
    assert "system.kind: all_to_all\n" in text, text


@pytest.mark.slow
def test_a_golden_fault_fails_the_case_with_a_reproducer(tmp_path):
    record = run_seed("system", 1, "verilator", tmp_path, inject="golden-fault",
                      only="case00.")
    assert record["status"] == "fail"
    (case,) = [c for c in record["cases"] if c["checked"]]
    assert case["mismatches"] == 1
    message = case["first_mismatch"]
    assert message.startswith("system seed 1 (2x2"), message
    assert "tpu-rtl regress system --backend verilator --seed 1 --only case00." in message, message
