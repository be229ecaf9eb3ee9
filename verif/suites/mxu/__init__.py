"""Suite ``mxu``: random matmul scenarios on the MXU against golden."""
