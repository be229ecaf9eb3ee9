"""Amaranth's Verilog, adjusted so that Icarus simulates it as Amaranth and Verilator do.

Both adjustments concern time zero, where Icarus follows the letter of
Verilog-2005 and the other simulators start from a known state.
"""

import re

__all__ = ["icarus_source"]


def icarus_source(text):
    """``text`` with read-port registers initialized and comb processes woken at time zero."""
    return _trigger_comb_processes(_initialize_read_registers(text))


_READ_REGISTER = re.compile(r"^(\s*reg (?:\[\d+:0\] )?)(\S+);$", re.M)


def _initialize_read_registers(text):
    """Start every memory read port's data register at zero, as Amaranth's simulator does.

    Amaranth's Verilog declares those registers without an initial value, and
    every other register with one. Verilator starts them at zero
    (``--x-initial fast``); Icarus starts them at X, which reaches a design's
    control logic through a payload that is not yet valid and wedges it.
    """
    assigned = set(re.findall(r"^\s*(\S+) <= [\w\\$.]+ ?\[", text, re.M))
    return _READ_REGISTER.sub(
        lambda match: f"{match[1]}{match[2]} = 0;" if match[2] in assigned else match[0], text)


_TRIGGER = re.compile(r"^(\s*)reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ ) = 0;$", re.M)


def _trigger_comb_processes(text):
    """Run every ``always @*`` process once at time zero, on Icarus too.

    Yosys makes each comb process read a register declared ``= 0`` so that the
    change from X at time zero wakes it. Icarus applies declaration
    initializers before any process runs, so no change happens, and a process
    whose inputs keep their initial values until much later (a reset-less
    source register and an index that rests at 0, say) holds X meanwhile. An
    ``initial`` assignment makes the change an event that the waiting
    processes see.
    """
    return _TRIGGER.sub(lambda match: f"{match[1]}reg {match[2]};\n"
                                      f"{match[1]}initial {match[2]} = 0;", text)
