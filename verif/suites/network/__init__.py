"""Suite ``network``: random ICI networks, traffic and link stalls, and the OCS under traffic."""
