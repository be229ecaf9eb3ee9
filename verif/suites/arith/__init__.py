"""Suite ``arith``: the floating-point units against golden, with the TestFloat-style corpus."""
