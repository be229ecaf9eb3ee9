"""Regression suite ``tensorcore``: random programs co-simulated on the chip and the ISS."""
