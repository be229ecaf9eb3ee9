"""Suite ``vpu``: constrained-random VPU programs against the golden executor."""
