"""Suite ``sparsecore``: random embedding batches on the SparseCore tile against golden."""
