"""Synthesizable Amaranth components, one package per block (SPEC section 2).

``hdl.lib`` holds what more than one block uses; ``hdl.arith`` the
floating-point units; ``hdl.mxu`` the systolic matrix unit.
"""
