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


_TRIGGER = re.compile(
    r"^([ \t]*)reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ ) = 0;$", re.M)
_BARE_COMB = re.compile(r"^([ \t]*)always @\*\n\s*([^\n]*;)$", re.M)


def _trigger_comb_processes(text):
    """Make Icarus run every ``always @*`` process once at time zero.

    Yosys makes each multi-statement comb process of a module read a register
    declared ``= 0``, so that its change from X at time zero wakes them. Icarus
    applies declaration initializers before any process runs, so nothing
    changes, and a one-statement process does not read the register at all. A
    process whose inputs keep their initial values until much later (a
    reset-less source register and an index that rests at 0; a state register
    an OCS decodes its ``ready`` from) holds X meanwhile. Here every comb
    process reads its module's register, which changes at ``#0``, once every
    process waits.
    """
    modules = re.split(r"(?m)^(?=module )", text)
    for k, module in enumerate(modules):
        if "always @*" not in module:
            continue
        trigger = _TRIGGER.search(module)
        if trigger is None:             # one-statement processes only: a register of our own
            name, indent = "\\tpu_rtl$kick ", "  "
            declaration = f"{indent}reg {name} = 0;"
            at = module.index(f"{indent}always @*")
            module = f"{module[:at]}{declaration}\n{module[at:]}"
        else:
            declaration, indent, name = trigger[0], trigger[1], trigger[2]
        module = _BARE_COMB.sub(
            lambda m: f"{m[1]}always @* begin if ({name}) begin end {m[2]} end", module)
        modules[k] = module.replace(declaration,
                                    f"{declaration}\n{indent}initial #0 {name}= 1;", 1)
    return "".join(modules)
