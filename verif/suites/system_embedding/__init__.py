"""Suite ``system_embedding``: random embedding steps on multi-chip systems of chips with a
SparseCore, bit for bit against ``golden.embedding``."""
