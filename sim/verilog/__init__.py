"""Verilog out of the Amaranth design: export (:mod:`.export`), lint with Verilator
(:mod:`.lint`), and the ECP5 synthesis and place-and-route flow (:mod:`.fpga`)."""
