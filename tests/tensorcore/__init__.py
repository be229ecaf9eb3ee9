"""Tests of golden.tensorcore: the TensorCore ISA, its assembler and its ISS."""
