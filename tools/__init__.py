"""Scripts that are neither product nor tests: soaks, audits and doc generators (run them
from the checkout as ``python -m tools.NAME``)."""
