"""Suite ``system``: random collectives on multi-chip TensorCore systems, bit for bit
against ``golden.collectives``."""
